"""Assertion helpers over the fake queues (rspec-sidekiq's ``have_enqueued_sidekiq_job``,
Celery's mocks): what must be waiting, told in the failure message with what is."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rfetch.jobs.job import Job
from rfetch.jobs.payload import Payload

TOLERANCE = 1.0
"""Seconds by which ``at`` and ``delay`` may differ (a push reads the clock more than once)."""


def assert_enqueued(
    waiting: Sequence[Payload],
    job_class: type[Job],
    *,
    args: Sequence[Any] | None = None,
    queue: str | None = None,
    at: float | dt.datetime | None = None,
    delay: float | dt.timedelta | None = None,
    count: int | None = None,
) -> list[Payload]:
    """Assert that jobs of ``waiting`` match; the matching payloads.

    Args:
        waiting: the waiting jobs of ``job_class`` (``FakeQueues.jobs(job_class)``).
        job_class: the job class, named in the message.
        args: the job's argument list as a worker receives it (keyword arguments bound to
            positions); ``unittest.mock.ANY`` matches any one argument. None: any.
        queue: the queue. None: any.
        at: the run time, epoch seconds or a datetime, within a second. None: any.
        delay: seconds (or a timedelta) from the push to the run time, within a second
            (``perform_in(3600, ...)`` has ``delay=3600``; 0 for a job due at once).
        count: exactly this many must match. None: at least one.

    Raises:
        AssertionError: they do not, with every waiting job of the class listed.
    """
    wanted_at = at.timestamp() if isinstance(at, dt.datetime) else at
    wanted_delay = delay.total_seconds() if isinstance(delay, dt.timedelta) else delay
    found = [
        p for p in waiting
        if (args is None or list(args) == p["args"])
        and (queue is None or p["queue"] == queue)
        and (wanted_at is None or abs(_run_time(p) - wanted_at) <= TOLERANCE)
        and (wanted_delay is None or abs(_delay(p) - wanted_delay) <= TOLERANCE)
    ]
    if (len(found) >= 1) if count is None else (len(found) == count):
        return found
    criteria = ", ".join(
        f"{name}={value!r}"
        for name, value in (("args", args), ("queue", queue), ("at", at), ("delay", delay))
        if value is not None
    )
    expected = "at least one" if count is None else str(count)
    listing = "\n".join(f"  {describe(p)}" for p in waiting) or "  (none)"
    raise AssertionError(
        f"expected {expected} {job_class.job_name()} job(s)"
        f"{' with ' + criteria if criteria else ''}, found {len(found)}; "
        f"waiting {job_class.job_name()} jobs:\n{listing}"
    )


def describe(payload: Payload) -> str:
    """One line for a waiting job: its arguments, queue and, if scheduled, delay."""
    text = f"args={payload['args']!r} queue={payload['queue']!r}"
    if payload.get("at") is not None:
        text += f" at={payload['at']:.3f} (delay {_delay(payload):g} s)"
    if payload.get("retry_count") is not None:
        text += f" retry_count={payload['retry_count']} error={payload.get('error_class')}"
    return text


def _run_time(payload: Payload) -> float:
    for field in ("at", "enqueued_at", "created_at"):
        if payload.get(field) is not None:
            return float(payload[field])
    return 0.0


def _delay(payload: Payload) -> float:
    return _run_time(payload) - float(payload["created_at"])
