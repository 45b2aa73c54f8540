"""The timekeeper: time limits and cancellation of the jobs this process runs.

One thread. About once a second (sooner when a hard limit is due), while jobs run:

* it reads the cancel marks ``cancel:<jid>`` of the running jobs in one ``MGET``
  (``rfetch.api.cancel`` writes them) and sets those jobs' cancel flags, which
  ``Job.check_cancelled()`` turns into ``rfetch.JobCancelled`` (the cooperative path);
* it takes the hard path for a job that is overdue (``job_timeout_grace`` seconds past its
  deadline, or past its cancel request): the job is recorded as failed with
  ``rfetch.JobTimeout`` (retry set, then dead set) or as cancelled (dropped, or the dead set
  if asked), by the same conditional ``settle.lua`` step as any failure; its thread stops
  counting as busy; and the process is told to retire (quiet, let the other running jobs
  finish within ``-t``, push back the rest, exit ``EXIT_RETIRED``). A Python thread cannot
  be stopped safely from outside, so the process is what ends; nothing else is lost or run
  twice.

See docs/guarantees.md, "Time limits", and docs/operations.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from rfetch.guard import ThreadGuard
from rfetch.jobs.job_control import Verdict, read_cancel_mark
from rfetch.store.connection import REDIS_DOWN
from rfetch.worker.context import WorkerContext
from rfetch.worker.retry import JobRetry
from rfetch.worker.work_state import Execution

log = logging.getLogger("rfetch.timekeeper")

CHECK_INTERVAL = 1.0
"""Seconds between two looks at the cancel marks and the deadlines (at most)."""


class Timekeeper:
    """Watches the running jobs' deadlines and cancel marks.

    Args:
        context: the client and key names (cancel marks ``cancel:<jid>``), the running
            executions (``work``), the counters (a job stopped the hard way counts as
            failed) and the error reporter (sees the ``JobTimeout`` / ``JobCancelled``).
        job_retry: records timed-out and cancelled jobs.
        retire: called once with a reason when a job was stopped the hard way; the
            launcher then retires the process.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        context: WorkerContext,
        job_retry: JobRetry,
        retire: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        redis = context.redis
        report = context.report
        self.redis = redis
        self.keys = context.keys
        self.work = context.work
        self.job_retry = job_retry
        self.stats = context.stats
        self.report = report
        self.retire = retire
        self.clock = clock
        self._marks_failing = False
        self.guard = ThreadGuard(
            "time-limit check", log, report, redis, first=CHECK_INTERVAL, cap=CHECK_INTERVAL
        )

    def run(self, stop: threading.Event) -> None:
        """Check until ``stop`` is set; every exception is logged and survived."""
        wait = CHECK_INTERVAL
        while not stop.wait(wait):
            try:
                self.check()
                wait = self.next_wait()
            except Exception as exc:
                # Logged once per kind (ThreadGuard); no back-off beyond the interval, so
                # hard limits stay enforced as soon as the error ends.
                wait = self.guard.failed(exc)
            else:
                self.guard.succeeded()

    def next_wait(self) -> float:
        """Seconds to the next check: :data:`CHECK_INTERVAL`, or less when a hard limit
        falls due sooner."""
        now = self.clock()
        due = [
            t - now
            for t in (e.control.next_due() for e in self.work.executions().values())
            if t is not None
        ]
        return max(0.01, min([CHECK_INTERVAL, *due]))

    def check(self) -> None:
        """One look: cancel marks, then overdue jobs."""
        executions = self.work.executions()
        if not executions:
            return
        self._read_marks(executions)
        now = self.clock()
        for thread_id, execution in executions.items():
            verdict = execution.control.overdue(now)
            if verdict is not None and execution.control.abandon():
                self._stop(thread_id, execution, verdict)

    def _read_marks(self, executions: dict[int, Execution]) -> None:
        pending = [e for e in executions.values() if not e.control.cancelled]
        if not pending:
            return
        try:
            marks = self.redis.mget([self.keys.cancel(e.payload["jid"]) for e in pending])
        except REDIS_DOWN as exc:
            if not self._marks_failing:
                log.error("cannot read cancel marks, Redis unreachable: %s", exc)
                self._marks_failing = True
            return
        self._marks_failing = False
        for execution, mark in zip(pending, marks, strict=True):
            if mark is not None:
                reason, dead = read_cancel_mark(mark)
                execution.control.cancel(reason, dead)
                log.info(
                    "cancel requested",
                    extra={"job_class": execution.payload["class"],
                           "jid": execution.payload["jid"], "queue": execution.unit.queue},
                )

    def _stop(self, thread_id: int, execution: Execution, verdict: Verdict) -> None:
        """The hard path for one overdue job."""
        control, payload, unit = execution.control, execution.payload, execution.unit
        self.work.abandon(thread_id)
        exc = control.error(verdict)
        name, jid = payload["class"], payload["jid"]
        elapsed = round((self.clock() - control.started) * 1000, 3)
        what = "timeout" if verdict == "timeout" else "cancel"
        log.error(
            "%s: %s; recorded as %s, the thread is abandoned and this process retires",
            what, exc, "failed" if verdict == "timeout" else "cancelled",
            extra={"job_class": name, "jid": jid, "queue": unit.queue, "elapsed_ms": elapsed},
        )
        self.stats.record(name, True, elapsed)
        self.report(exc, {"job": payload, "queue": unit.queue, "jid": jid, "hard": True})
        try:
            if verdict == "timeout":
                self.job_retry.fail(unit, payload, execution.instance, exc)
            else:
                self.job_retry.cancel(unit, payload, exc, control.cancel_to_dead)
        except REDIS_DOWN as error:
            log.error(
                "could not record jid=%s (%s); it stays in the private list and is pushed "
                "back with the rest", jid, error,
            )
        except Exception as error:  # rfetch failed on it: pushed back counted, or buried
            self.job_retry.rfetch_failed(unit, error)
        why = "overran its time limit" if verdict == "timeout" else "ignored its cancel"
        self.retire(f"job {jid} ({name}) {why}")
