"""Seeing what rfetch does: Prometheus metrics (:mod:`.metrics`, which needs
prometheus-client), the execution counters the heartbeat flushes (:mod:`.stats`) and the
worker's log lines (:mod:`.logs`, :mod:`.log_format`, :mod:`.log_context`). This package
imports nothing itself, so the logs load without prometheus-client."""
