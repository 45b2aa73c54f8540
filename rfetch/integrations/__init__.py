"""Optional integrations with other services; each imports its third-party library only
when it is used, so ``import rfetch`` never needs them.

* :mod:`rfetch.integrations.sentry`: report job failures and internal errors to Sentry
  (the ``sentry`` extra: ``pip install 'rfetch[sentry]'``).
"""
