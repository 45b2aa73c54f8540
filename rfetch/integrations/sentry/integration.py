"""``RfetchIntegration``: rfetch as a sentry-sdk integration, shaped like sentry-sdk's own
Celery, RQ, arq and Dramatiq integrations::

    sentry_sdk.init(dsn=..., traces_sample_rate=0.1, integrations=[RfetchIntegration()])

sentry-sdk integrations patch their library in ``setup_once``; rfetch instead has seams
given at construction (``Config.client_middleware``, ``server_middleware``,
``error_handlers``), so the integration holds the options and
:func:`rfetch.integrations.sentry.install` puts the middleware and the error handler into a
Config (``rfetch worker`` calls it for you). The middleware read the options of the
integration the client was initialised with at each call, as sentry-sdk's integrations do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sentry_sdk.integrations import Integration
from sentry_sdk.integrations.logging import ignore_logger

from rfetch.integrations.sentry import DUPLICATE_LOGGERS


class RfetchIntegration(Integration):
    """sentry-sdk integration for rfetch: job context on errors, a transaction per job run
    continuing the producer's trace, Sentry Crons check-ins for periodic jobs.

    Args:
        monitor_periodic: send check-ins for periodic jobs (default True).
        exclude_periodic: regular expressions; schedules whose name matches one are not
            monitored (sentry-sdk's ``match_regex_list``, as Celery's ``exclude_beat_tasks``).
        monitor_config: monitor settings over the ones built from each schedule, e.g.
            ``{"checkin_margin": 2, "max_runtime": 30, "failure_issue_threshold": 1}``
            (minutes, and counts of check-ins; Sentry's monitor config fields).
    """

    identifier = "rfetch"
    origin = f"auto.queue.{identifier}"

    def __init__(
        self,
        *,
        monitor_periodic: bool = True,
        exclude_periodic: Sequence[str] | None = None,
        monitor_config: Mapping[str, Any] | None = None,
    ) -> None:
        self.monitor_periodic = monitor_periodic
        self.exclude_periodic = list(exclude_periodic or [])
        self.monitor_config = dict(monitor_config or {})

    def __repr__(self) -> str:
        return (
            f"RfetchIntegration(monitor_periodic={self.monitor_periodic}, "
            f"exclude_periodic={self.exclude_periodic}, monitor_config={self.monitor_config})"
        )

    @staticmethod
    def setup_once() -> None:
        """Keep rfetch's duplicating loggers out of sentry-sdk's logging integration."""
        for name in DUPLICATE_LOGGERS:
            ignore_logger(name)
