"""Cancelled before it starts: a job with a cancel mark is recorded as cancelled, not run.

``rfetch.api.cancel`` writes the mark ``cancel:<jid>``, adds the jid to the index
``rfetch:cancels`` (jid -> the mark's expiry) and announces it on ``rfetch:cancel``. Each
worker keeps the announced jids in memory (the pause watcher's subscription delivers them;
the whole index is read again whenever the subscription is made), so the check the
processor makes before a job starts, where the expiry check is, costs one dict lookup
while no cancel is pending and one ``GET`` of the mark only for an announced jid.

That check is what stops a job that waits in a worker (fetched ahead, behind a long job),
behind its ordering key's holder or for a fetch cap's slot (both are fetched once
released), or in a queue it was taken from while the cancel looked for it. Such a job ends
exactly as a job cancelled while running: :meth:`JobRetry.cancel` drops it or puts it in
the dead set by the same call that takes it out of the private list (its batch counts a
death, its ``store_result`` record is written, its cap slot, ordering key and unique lock
are given back), it counts as failed, the error and death handlers see the
``rfetch.JobCancelled``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from redis import Redis

from rfetch.errors import JobCancelled
from rfetch.jobs.job_control import CANCEL_TTL, read_cancel_mark
from rfetch.jobs.payload import Payload
from rfetch.observability.stats import Stats
from rfetch.store.keys import Keys
from rfetch.worker.job_run import JobRun
from rfetch.worker.reporting import ErrorReporter
from rfetch.worker.retry import JobRetry
from rfetch.worker.steps import Step
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.job")


class CancelMarks:
    """The jids with a pending cancel mark, as this worker last heard (no round trip).

    Args:
        redis: the worker's client.
        keys: key names of the namespace.
        clock: epoch seconds now (``time.time``; tests pass their own).
    """

    def __init__(
        self, redis: Redis, keys: Keys, clock: Callable[[], float] = time.time
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, float] = {}
        """jid -> when its mark expires (epoch s)."""

    def announced(self, jid: str) -> bool:
        """Whether ``jid`` was announced as cancelled (no round trip)."""
        return jid in self._pending

    def note(self, jid: bytes | str) -> None:
        """An announced jid (a message on ``rfetch:cancel``)."""
        name = jid.decode("utf-8", "replace") if isinstance(jid, bytes) else jid
        now = self.clock()
        with self._lock:
            self._pending[name] = now + CANCEL_TTL
            self._prune(now)

    def reload(self) -> None:
        """Read the index ``rfetch:cancels`` again (one ``ZRANGE``): on every subscription,
        so that announcements missed while unsubscribed are not lost.

        Raises:
            redis.exceptions.RedisError: Redis refused or is unreachable.
        """
        now = self.clock()
        rows: list[tuple[bytes, float]] = self.redis.zrange(  # type: ignore[assignment]
            self.keys.cancels, now, "+inf", byscore=True, withscores=True
        )
        fresh = {jid.decode("utf-8", "replace"): float(score) for jid, score in rows}
        with self._lock:
            self._pending = fresh

    def requested(self, jid: str) -> tuple[str, bool] | None:
        """``(reason, dead)`` of the cancel mark of ``jid``, or None when it has none: no
        round trip unless the jid was announced; then one ``GET``.

        Raises:
            redis.exceptions.RedisError: the ``GET`` failed.
        """
        if jid not in self._pending:
            return None
        mark = self.redis.get(self.keys.cancel(jid))
        if mark is None:  # withdrawn (the job was not found) or expired
            with self._lock:
                self._pending.pop(jid, None)
            return None
        return read_cancel_mark(mark)

    def _prune(self, now: float) -> None:
        for jid in [j for j, until in self._pending.items() if until < now]:
            del self._pending[jid]


class CancelCheck(Step):
    """The server step before a job starts: a job with a cancel mark ends as cancelled
    (outcome ``"cancelled"``) instead of running.

    Args:
        marks: the pending cancel marks.
        job_retry: records the cancelled job (:meth:`JobRetry.cancel`).
        stats: counts it as failed, as a job cancelled while running.
        report: the error reporter (sees the ``rfetch.JobCancelled``).
    """

    name = "cancel-before-start"

    def __init__(
        self, marks: CancelMarks, job_retry: JobRetry, stats: Stats, report: ErrorReporter
    ) -> None:
        self.marks = marks
        self.job_retry = job_retry
        self.stats = stats
        self.report = report

    def applies(self, run: JobRun) -> bool:
        """Whether the jid was announced as cancelled (no round trip)."""
        return self.pending(run.job)

    def before(self, run: JobRun) -> str | None:
        """``"cancelled"`` when the job had a cancel mark (see :meth:`dropped`)."""
        return "cancelled" if self.dropped(run.unit, run.job) else None

    def pending(self, job: Payload) -> bool:
        """Whether ``job``'s jid was announced as cancelled (no round trip)."""
        return self.marks.announced(job["jid"])

    def dropped(self, unit: UnitOfWork, job: Payload) -> bool:
        """Whether ``job`` has a cancel mark; if so it is recorded as cancelled (never
        run), with the bookkeeping of a cancel while running.

        Raises:
            redis.exceptions.RedisError: reading the mark or recording the cancel failed
                (the processor reports it as rfetch's own failure).
        """
        if not self.pending(job):
            return False
        mark = self.marks.requested(job["jid"])
        if mark is None:
            return False
        reason, dead = mark
        exc = JobCancelled(f"cancelled: {reason}" if reason else "cancelled")
        name, jid = job["class"], job["jid"]
        log.warning(
            "cancelled before it started: %s; %s, not run",
            exc, "put in the dead set" if dead else "dropped",
            extra={"job_class": name, "jid": jid, "queue": unit.queue, "elapsed_ms": 0.0},
        )
        self.stats.record(name, True, 0.0)
        self.report(exc, {"job": job, "queue": unit.queue, "jid": jid})
        self.job_retry.cancel(unit, job, exc, dead)
        return True
