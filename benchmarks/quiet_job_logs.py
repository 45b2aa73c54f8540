"""``-r benchmarks.quiet_job_logs``: a worker without its per-job ``start`` / ``done`` INFO
lines (logger ``rfetch.job`` at WARNING), as the peers' per-job logging is measured off
(``python -m benchmarks.rfetch_drain --no-job-logs``). Not rfetch's default."""

import logging

logging.getLogger("rfetch.job").setLevel(logging.WARNING)
