"""A package whose job classes live in a module of it, not in ``__init__``: a worker loads
it with ``-r ./billingpkg`` (a package folder) or ``-r ./billingpkg/jobs.py``."""
