"""Sentry Crons check-ins for periodic jobs (the model: sentry-sdk's Celery ``monitor_beat_tasks``
and RQ ``monitor_cron_jobs``).

A periodic job (its payload has ``periodic``, the schedule's name) sends an ``in_progress``
check-in when its run starts and ``ok`` or ``error`` when it ends, with the run's duration.
Every check-in carries the monitor's config, built from the schedule's cron expression and
time zone, so Sentry creates (upserts) the monitor on the first one and keeps it in step with
the code; Sentry then reports the ticks that send no check-in (missed) and the runs that
end in ``error`` (failed).

Only a tick's first run checks in: a retry is not a tick, and a retry that succeeds later
must not turn a failed tick into a good one.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sentry_sdk.crons import MonitorStatus, capture_checkin
from sentry_sdk.utils import logger, match_regex_list

from rfetch.jobs.cron import MACROS
from rfetch.jobs.schedule import PeriodicRegistry, Schedule

if TYPE_CHECKING:
    from sentry_sdk._types import MonitorConfig

    from rfetch.integrations.sentry.integration import RfetchIntegration

MAX_SLUG_LENGTH = 50
"""Sentry's longest monitor slug."""

_NOT_SLUG = re.compile(r"[^a-z0-9_-]+")


def monitor_slug(name: str) -> str:
    """The Sentry monitor slug of the schedule called ``name``: lower case, each run of
    characters other than ``a-z0-9_-`` made one ``-``; a name longer than
    :data:`MAX_SLUG_LENGTH` keeps its start and ends with a hash of the whole name, so two
    long names stay two monitors."""
    slug = _NOT_SLUG.sub("-", name.lower()).strip("-") or "rfetch"
    if slug.isdigit():
        slug = f"rfetch-{slug}"  # Sentry refuses a slug of digits only
    if len(slug) <= MAX_SLUG_LENGTH:
        return slug
    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]
    return f"{slug[: MAX_SLUG_LENGTH - 9].rstrip('-')}-{digest}"


def crontab_of(expression: str) -> str | None:
    """``expression`` as the 5-field crontab Sentry takes, or None when Sentry cannot express
    it: macros are expanded; a seconds field is dropped when it is one fixed second (the
    schedule then fires once a minute at most); a seconds field with more than one value
    (``*/10 * * * * *``) fires more often than Sentry's one-minute resolution."""
    text = " ".join(expression.split())
    fields = MACROS.get(text.lower(), text).split()
    if len(fields) == 6:
        if not fields[0].isdigit():
            return None
        fields = fields[1:]
    return " ".join(fields) if len(fields) == 5 else None


def monitor_config(
    schedule: Schedule, overrides: Mapping[str, Any] | None = None
) -> MonitorConfig | None:
    """The monitor config of ``schedule`` (a ``crontab`` schedule in the schedule's time
    zone), with ``overrides`` (e.g. ``checkin_margin``, ``max_runtime`` in minutes) over
    it; None when its expression fires more often than once a minute."""
    crontab = crontab_of(schedule.cron.expression)
    if crontab is None:
        return None
    config: dict[str, Any] = {
        "schedule": {"type": "crontab", "value": crontab},
        "timezone": schedule.cron.tz,
    }
    config.update(overrides or {})
    return config  # type: ignore[return-value]  # a MonitorConfig (TypedDict) by its keys


@dataclass(frozen=True)
class CheckIn:
    """The ``in_progress`` check-in of one run, finished by :meth:`finish`.

    Attributes:
        slug: the monitor slug.
        config: the monitor config sent with each check-in (None: the monitor must exist).
        check_in_id: the id Sentry pairs the closing check-in with.
        started: ``time.monotonic()`` at the start, seconds.
    """

    slug: str
    config: MonitorConfig | None
    check_in_id: str
    started: float

    def finish(self, ok: bool) -> None:
        """Send the closing check-in: ``ok`` or ``error``, with the duration in seconds."""
        capture_checkin(
            monitor_slug=self.slug,
            monitor_config=self.config,
            check_in_id=self.check_in_id,
            duration=time.monotonic() - self.started,
            status=MonitorStatus.OK if ok else MonitorStatus.ERROR,
        )


class CheckIns:
    """Starts the check-ins of periodic jobs' runs.

    Args:
        periodic: the worker's schedules (``Config.periodic``), read at each run; a job whose
            schedule this worker does not know (pushed by another application's leader)
            checks in without a monitor config, to a monitor that must exist in Sentry.
    """

    def __init__(self, periodic: PeriodicRegistry) -> None:
        self.periodic = periodic

    def start(self, payload: Mapping[str, Any], options: RfetchIntegration) -> CheckIn | None:
        """Send the ``in_progress`` check-in of this run of ``payload``; None (nothing sent)
        when it is not a periodic job's first run, or crons are off or exclude it."""
        name = payload.get("periodic")
        if not options.monitor_periodic or not isinstance(name, str) or not name:
            return None
        if payload.get("retry_count") is not None:
            return None
        if match_regex_list(name, options.exclude_periodic):
            return None
        schedule = self.periodic.get(name)
        config = None
        if schedule is not None:
            config = monitor_config(schedule, options.monitor_config)
            if config is None:
                logger.debug(
                    "not monitoring periodic job %r: Sentry Crons has a one-minute "
                    "resolution, its schedule %r fires more often", name,
                    schedule.cron.expression,
                )
                return None
        slug = monitor_slug(name)
        check_in_id = capture_checkin(
            monitor_slug=slug, monitor_config=config, status=MonitorStatus.IN_PROGRESS
        )
        if check_in_id is None:  # dropped by the client (before_send, rate limits)
            return None
        return CheckIn(slug, config, check_in_id, time.monotonic())
