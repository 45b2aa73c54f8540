"""A job over a limiter's limit: rescheduled, not failed (Sidekiq Enterprise's limiter
middleware).

``within_limit`` raises :class:`rfetch.OverLimit` when a limiter had no capacity within its
``wait_timeout``. Raised out of ``perform``, the worker puts the job in the scheduled set
``backoff`` seconds ahead, atomically with its removal from the private list
(``settle.lua``, the scheduled set instead of the retry set), counting the reschedules in
the payload's ``overrated`` field (Sidekiq Enterprise's name, so a Ruby worker reading the
job counts on) and leaving ``retry_count`` as it was. Past the limiter's ``reschedule``
maximum it is a normal failure (retry set, then dead set).
"""

from __future__ import annotations

import logging
import math
import random
import time
from typing import TYPE_CHECKING

from rfetch.errors import OverLimit
from rfetch.jobs.payload import Payload, dumps
from rfetch.limiter.spec import default_backoff
from rfetch.observability.stats import Stats
from rfetch.store.keys import Keys
from rfetch.worker.job_run import JobRun
from rfetch.worker.steps import Step
from rfetch.worker.unit import UnitOfWork

if TYPE_CHECKING:
    from rfetch.worker.retry import JobRetry

log = logging.getLogger("rfetch.retry")

COUNT_FIELD = "overrated"
"""The payload field counting a job's over-limit reschedules (Sidekiq Enterprise's)."""


def overrated(job: Payload) -> int:
    """The job's over-limit reschedules so far (0 for a missing or malformed field)."""
    value = job.get(COUNT_FIELD)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def delay_of(count: int, job: Payload, exc: OverLimit, rng: random.Random) -> float:
    """Seconds before reschedule number ``count`` (0-based): the limiter's ``backoff``, or
    Sidekiq Enterprise's ``300 * count + rand(300) + 1``. A backoff that raises or returns
    something other than a finite number >= 0 is logged and the default used."""
    if exc.backoff is None:
        return default_backoff(count, rng)
    try:
        value = exc.backoff(count, dict(job))
    except Exception as hook_exc:
        log.error("backoff of limiter %s raised %r; using the default", exc.name, hook_exc)
        return default_backoff(count, rng)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value >= 0
    ):
        log.error("backoff of limiter %s returned %r; using the default", exc.name, value)
        return default_backoff(count, rng)
    return float(value)


def reschedule(
    unit: UnitOfWork, job: Payload, exc: OverLimit, keys: Keys, rng: random.Random
) -> str:
    """Reschedule a job that raised ``exc``, unless it was rescheduled ``exc.reschedule``
    times already.

    Returns:
        ``"rescheduled"``, ``"lost-ownership"`` (no longer in the private list: nothing was
        written) or ``"exhausted"`` (nothing written: the caller fails the job normally).
    """
    count = overrated(job)
    if count >= exc.reschedule:
        return "exhausted"
    delay = delay_of(count, job, exc, rng)
    job[COUNT_FIELD] = count + 1
    written = unit.settle(keys.schedule, time.time() + delay, dumps(job, 2**62), outcome="retry")
    if not written:
        return "lost-ownership"
    log.info(
        "over limit: %s jid=%s rescheduled in %.0f s (limiter %s, reschedule %d of %d)",
        job["class"], job["jid"], delay, exc.name, count + 1, exc.reschedule,
    )
    return "rescheduled"


class OverLimitStep(Step):
    """The server step that takes over a job raising :class:`rfetch.OverLimit`: it is
    rescheduled (outcome ``"rescheduled"``), counted as processed, not failed, with no
    error handler called (Sidekiq Enterprise's middleware swallows the error the same way);
    past its ``reschedule`` maximum it is left to fail normally.

    Args:
        job_retry: writes the reschedule (:meth:`JobRetry.overlimit`).
        stats: counts the job as processed.
    """

    name = "over-limit"

    def __init__(self, job_retry: JobRetry, stats: Stats) -> None:
        self.job_retry = job_retry
        self.stats = stats

    def claim(self, run: JobRun, exc: BaseException) -> str | None:
        """``"rescheduled"`` for an over-limit job rescheduled (or no longer ours)."""
        if not isinstance(exc, OverLimit):
            return None
        if self.job_retry.overlimit(run.unit, run.job, exc) == "exhausted":
            return None
        self.stats.record(run.job["class"], False, run.elapsed_ms())
        return "rescheduled"
