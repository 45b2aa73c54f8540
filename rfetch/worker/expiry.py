"""Expiring jobs (Sidekiq Pro's ``expires_in``): a job not started by its payload's
``expires_at`` is dropped instead of run, never run late.

The check is made by the processor right after it parses the payload and before anything
of the job runs (server middleware, ``perform``). It is not made inside ``fetch.lua``:
there it would cost every plain job a payload search on the hot path, while the processor
parses the payload anyway, and the job is then already in this process's private list, so
dropping it is an ordinary acknowledgement (a capped job gives its slot back, a keyed job
releases its key, by the same call). A job fetched ahead (prefetch) is checked when it
starts, not when it was fetched, which is what "started by then" means.

Times are epoch seconds on the worker's clock against the pushing client's clock: a skew
between the two hosts moves the deadline by as much (NTP keeps it to milliseconds).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from rfetch.jobs.payload import Payload, epoch_seconds
from rfetch.store.outcomes import JobOutcome
from rfetch.store.workflow_commands import Ending
from rfetch.worker.context import WorkerContext
from rfetch.worker.job_run import JobRun
from rfetch.worker.outcome import RecordedUnit, recorded_ttl
from rfetch.worker.steps import Step
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.expiry")

EXPIRED_CLASS = "rfetch.JobExpired"
"""The error class an expired job's batch failure and ``store_result`` record carry."""


class Expiry(Step):
    """The server step that drops expired jobs (outcome ``"expired"``): acknowledged
    (removed from the private list, releasing what the job holds; a batched job counts a
    death in its batch, ``rfetch.JobExpired``), counted in ``stat:expired`` and per queue
    in ``rfetch:expired``, and logged with the jid.

    Args:
        context: the worker's client (one round trip per expired job) and key names.
        ack: how a finished job is acknowledged (the processor's).
        clock: epoch seconds now (``time.time``; tests pass their own).
    """

    name = "expiry"

    def __init__(
        self,
        context: WorkerContext,
        ack: Callable[[UnitOfWork], object],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = context.redis
        self.keys = context.keys
        self.ack = ack
        self.clock = clock

    def applies(self, run: JobRun) -> bool:
        """Whether the payload has an expiry (most have not: one dict lookup)."""
        return "expires_at" in run.job

    def before(self, run: JobRun) -> str | None:
        """``"expired"`` when the job was dropped (see :meth:`dropped`)."""
        return "expired" if self.dropped(run.unit, run.job) else None

    def dropped(self, unit: UnitOfWork, job: Payload) -> bool:
        """Whether ``job`` expired before this start; if so it is acknowledged (not run),
        counted and logged. A payload without a numeric ``expires_at`` never expires.

        Raises:
            redis.exceptions.RedisError: counting failed (the job is already acknowledged;
                the processor reports it as rfetch's own failure).
        """
        expires_at = epoch_seconds(job.get("expires_at"))
        if expires_at is None:
            return False
        now = self.clock()
        if now <= expires_at:
            return False
        message = f"expired {now - expires_at:.3f} s before it started"
        ttl = recorded_ttl(unit)
        if ttl is not None:  # store_result: its dead record and its waiting jobs, with the ack
            self.ack(RecordedUnit.of(unit, str(job.get("class", "")), Ending(
                "dead", ttl, error_class=EXPIRED_CLASS, error_message=message,
                outcome=JobOutcome.EXPIRED,
            )))
        else:  # never run, so not a success: lib/outcome.lua's expired (a batch's death)
            unit.discard({**job, "error_class": EXPIRED_CLASS, "error_message": message},
                         JobOutcome.EXPIRED)
        log.warning(
            "expired: %s jid=%s queue=%s not started %.3f s after its expiry; dropped, not run",
            job.get("class"),
            job.get("jid"),
            unit.queue,
            now - expires_at,
        )
        pipe = self.redis.pipeline(transaction=False)
        pipe.incr(self.keys.expired)
        pipe.hincrby(self.keys.expired_queues, unit.queue, 1)
        pipe.execute()
        return True
