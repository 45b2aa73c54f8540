"""The outbox in rfetch's faces: the web UI's dashboard tile, ``/metrics``, ``rfetch check``
and ``rfetch explain`` read its backlog and rows through :class:`OutboxView`."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rfetch.outbox.backlog import Backlog, OutboxRow, read_backlog, read_row

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

log = logging.getLogger("rfetch.outbox")


@dataclass(frozen=True)
class BacklogReading:
    """One look at the backlog: the backlog, or why the database could not say.

    Attributes:
        backlog: the backlog, None when the database could not be read.
        error: the error's text when it could not ("" otherwise).
    """

    backlog: Backlog | None
    error: str = ""


class OutboxView:
    """Reads one outbox database for the faces; every read opens and closes a connection
    of its own (the faces read seldom: a page view, a scrape, a probe).

    Args:
        url: the outbox's database URL (see :func:`rfetch.outbox.connection.connect`).
        max_attempts: the relays' ``max_attempts`` (rows refused that often are parked).
    """

    def __init__(self, url: str, max_attempts: int = 5) -> None:
        self.url = url
        self.max_attempts = max_attempts

    def read(self) -> BacklogReading:
        """The backlog, never raising: a database error is its text in the reading."""
        try:
            return BacklogReading(read_backlog(self.url, self.max_attempts))
        except Exception as exc:
            log.warning("cannot read the outbox backlog: %s", exc)
            return BacklogReading(None, f"{type(exc).__name__}: {exc}")

    def row(self, jid: str) -> OutboxRow | None:
        """The committed outbox row of ``jid``, or None.

        Raises:
            ConfigError, the driver's errors: the database cannot be read.
        """
        return read_row(self.url, jid)


class OutboxCollector:
    """Prometheus collector of the outbox's backlog, read on each scrape:
    ``rfetch_outbox_up`` (1 when the database answered), ``rfetch_outbox_backlog_jobs``,
    ``rfetch_outbox_oldest_age_seconds`` and ``rfetch_outbox_parked_jobs``."""

    def __init__(self, view: OutboxView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily  # the web extra's

        reading = self.view.read()
        yield GaugeMetricFamily("rfetch_outbox_up", "1 when the outbox database answered.",
                                value=0 if reading.backlog is None else 1)
        if reading.backlog is None:
            return
        found = reading.backlog
        yield GaugeMetricFamily("rfetch_outbox_backlog_jobs",
                                "Jobs committed to the outbox table, not yet relayed to Redis.",
                                value=found.size)
        yield GaugeMetricFamily("rfetch_outbox_oldest_age_seconds",
                                "Seconds since the oldest outbox row was written (0: none).",
                                value=found.oldest_age)
        yield GaugeMetricFamily("rfetch_outbox_parked_jobs",
                                "Outbox rows Redis refused max_attempts times, left for an "
                                "operator.", value=found.parked)


def explain_lines(row: OutboxRow, now: float) -> list[str]:
    """What ``rfetch explain`` says of a job found in the outbox (``now``: epoch s)."""
    lines = [
        f"in the outbox (row {row.id}, queue {row.queue}): committed, not yet relayed to "
        f"Redis; written {max(0.0, now - row.created_at):.1f} s ago"
    ]
    if row.attempts:
        lines.append(f"Redis refused it {row.attempts} time(s): {row.last_error}")
    return lines


def check_backlog(
    reading: BacklogReading, max_age: float | None, max_size: int | None
) -> tuple[bool | None, str]:
    """``rfetch check``'s verdict on the outbox: (True, "OK ..."), (False, "CRITICAL ...")
    when the oldest row is older than ``max_age`` seconds, the backlog holds more than
    ``max_size`` rows or a row is parked; (None, "UNKNOWN ...") when the database could not
    be read."""
    found = reading.backlog
    if found is None:
        return None, f"UNKNOWN cannot read the outbox database: {reading.error}"
    summary = f"outbox backlog {found.size} row(s), oldest {found.oldest_age:.1f} s"
    if max_age is not None and found.oldest_age > max_age:
        return False, f"CRITICAL {summary} (over {max_age:g} s)"
    if max_size is not None and found.size > max_size:
        return False, f"CRITICAL {summary} (over {max_size} rows)"
    if found.parked:
        return False, f"CRITICAL {summary}; {found.parked} row(s) refused by Redis, parked"
    return True, f"OK {summary}"
