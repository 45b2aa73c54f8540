"""Optional integrations with other services and frameworks; ``import rfetch`` imports none
of them, so it never needs their third-party libraries.

* :mod:`rfetch.integrations.sentry`: the sentry-sdk integration: job failures and internal
  errors, a transaction per job run continuing the push's trace, Crons check-ins for
  periodic jobs (the ``sentry`` extra: ``pip install 'rfetch[sentry]'``).
* :mod:`rfetch.integrations.opentelemetry`: producer and consumer spans, the trace context
  carried in the payload as Ruby's Sidekiq instrumentation carries it (the ``otel`` extra).
* :mod:`rfetch.integrations.django`: settings, pushes on commit, the web UI behind staff
  login, a worker that closes stale database connections (the ``django`` extra).
"""
