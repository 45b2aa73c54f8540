"""``rfetch.options``: kept for code written against the earlier docs;
the module is :mod:`rfetch.jobs.options`."""

from rfetch.jobs.options import JobOptions as JobOptions

__all__ = ["JobOptions"]
