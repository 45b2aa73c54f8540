"""One job execution: parse, look up the class, middleware, perform, then ack or retry."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, cast

from rfetch.batch.context import enter_job
from rfetch.config import Config
from rfetch.durable.checkpoint import Hold
from rfetch.errors import InvalidJob, JobCancelled, OverLimit, ResultNotSerializable
from rfetch.job import Job
from rfetch.limits import JobControl, timeout_of
from rfetch.log_context import JobContext
from rfetch.logs import JobLog
from rfetch.middleware import run_server_chain, run_server_chain_async
from rfetch.payload import Payload, Routing, loads
from rfetch.stats import Stats
from rfetch.store.checkpoint_commands import CheckpointCommands
from rfetch.store.workflow_commands import Ending
from rfetch.worker.cancels import CancelCheck
from rfetch.worker.durable_end import DURABLE_ENDS, durable_end
from rfetch.worker.expiry import Expiry
from rfetch.worker.job_run import JobRun
from rfetch.worker.outcome import RecordedUnit, recorded_ttl, result_text
from rfetch.worker.registry import Registry
from rfetch.worker.reporting import ErrorReporter
from rfetch.worker.retry import JobRetry
from rfetch.worker.unit import UnitOfWork
from rfetch.worker.work_state import Execution as WatchedExecution
from rfetch.worker.work_state import WorkState
from rfetch.workflow.progress import ProgressWriter

log = logging.getLogger("rfetch.job")

Handled = Literal["done", "rfetch-failed", "stuck"]
"""How :meth:`Processor.process` left a job (see there)."""

COALESCE_MAX = 1000
"""Waiting jobs of a key merged into one execution at most; the rest form the next one."""


class Processor:
    """Runs fetched jobs; shared by the pool's threads (it keeps no per-job state).

    Sidekiq's ``Processor#process``: parse, look up the class, server middleware, perform,
    then acknowledge (success) or hand the failure to :class:`JobRetry`.

    Each execution gets a :class:`~rfetch.limits.JobControl` (its time limit, from the
    payload's ``timeout`` or ``config.job_timeout``, and its cancel flag), registered in
    ``work`` for the timekeeper under its thread's id (an async job's: its task's slot). A
    job raising ``rfetch.JobCancelled`` is recorded as cancelled (never retried); a job
    whose outcome the timekeeper already recorded (the hard path) is left alone when it
    comes back.

    Args:
        config: server middleware.
        registry: the job classes this worker may run.
        job_retry: records failures.
        stats: processed/failed counters.
        report: the error reporter (job failures, invalid payloads).
        ack: acknowledges a finished job (default :meth:`UnitOfWork.acknowledge`, at once;
            a worker passes its :class:`rfetch.worker.acks.DeferredAcks`, which rides on
            the next fetch).
        work: where executions are registered for the timekeeper (None: nobody watches
            time limits or cancellations, as in tests that run the processor alone).
        job_context: where the running job is marked for the application's log records
            (the one the log handler filters with; default: a context of its own).
        progress: where jobs' ``self.progress(...)`` writes (None: only checked).
        expiry: drops a job past its ``expires_at`` before it runs (expiring jobs; None:
            no check, as in tests that run the processor alone).
        cancels: records a job with a cancel mark as cancelled before it runs (None: no
            check, as in tests that run the processor alone).
    """

    def __init__(
        self,
        config: Config,
        registry: Registry,
        job_retry: JobRetry,
        stats: Stats,
        report: ErrorReporter,
        ack: Callable[[UnitOfWork], object] = lambda unit: unit.acknowledge(),
        work: WorkState | None = None,
        job_context: JobContext | None = None,
        progress: ProgressWriter | None = None,
        expiry: Expiry | None = None,
        cancels: CancelCheck | None = None,
    ) -> None:
        self.progress = progress
        self.cancels = cancels
        self.config = config
        self.expiry = expiry
        self.work = work
        self.registry = registry
        self.job_retry = job_retry
        self.stats = stats
        self.report = report
        self.ack = ack
        self.job_log = JobLog(log)
        self.job_context = job_context or JobContext()

    def process(self, unit: UnitOfWork) -> Handled:
        """Run one job to its end: acknowledged, in the retry/dead set, or discarded.

        Never raises for a job's own failure; the worker thread goes on. The job is marked
        as running (:class:`JobContext`) in a copy of the thread's context, dropped at the
        end, so no record logged after it carries its jid. When rfetch itself fails on the
        job (recording its failure raises, Redis refuses a write), see
        :meth:`rfetch_failed`.

        Args:
            unit: the fetched job.

        Returns:
            ``"done"``; or, when rfetch failed on the job, ``"rfetch-failed"`` (pushed back
            or buried) or ``"stuck"`` (Redis refused that too: it stays in its private list).
        """
        return contextvars.copy_context().run(self._guarded, unit)

    def _guarded(self, unit: UnitOfWork) -> Handled:
        try:
            self._process(unit)
        except Exception as exc:
            return self.rfetch_failed(unit, exc)
        return "done"

    def rfetch_failed(self, unit: UnitOfWork, exc: BaseException) -> Handled:
        """rfetch (not the job) raised while handling ``unit``: report it, then push the
        job back counting such attempts, or at ``poison_max_recoveries`` send it to the dead
        set with the error recorded (:meth:`JobRetry.rfetch_failed`), so it runs a bounded
        number of times.

        Returns:
            ``"rfetch-failed"``, or ``"stuck"`` when Redis refused both: the job stays in
            its private list.
        """
        self.report(exc, {"context": "processor"})
        if self.job_retry.rfetch_failed(unit, exc) == "stuck":
            return "stuck"
        return "rfetch-failed"

    def _process(self, unit: UnitOfWork) -> None:
        try:
            job = loads(unit.raw)
        except InvalidJob as exc:
            self._bury(unit, exc)
            return
        # "in" first: a job without an expiry (most) costs one dict lookup here.
        if "expires_at" in job and self.expiry is not None and self.expiry.dropped(unit, job):
            return
        if self.cancels is not None and self.cancels.dropped(unit, job):
            return
        routing = unit.routing
        followers = self._take_followers(unit) if routing and routing.coalesced else []
        execution = self._start(unit, job, followers)
        try:
            self._perform(execution)
            result = self._result(execution)
        except BaseException as exc:  # a job's failure, whatever it raised, is a retry
            self._failed(execution, exc)
            return
        self._finished(execution, result)

    async def aprocess(self, unit: UnitOfWork, shutting_down: Callable[[], bool]) -> None:
        """:meth:`process` for an async job, on the worker's event loop: ``perform`` and the
        server middleware are awaited; what waits on Redis beyond the acknowledgement (a
        failure's retry, an invalid payload, a coalesced key's followers) runs in the loop's
        executor, so the loop never waits for it.

        Args:
            unit: the fetched job.
            shutting_down: whether the worker cancelled its async jobs (TERM past the
                timeout); a job cancelled then is left in the private list, to be pushed
                back, instead of failing. A job that raises ``CancelledError`` by itself
                fails as any other exception.

        Raises:
            asyncio.CancelledError: cancelled at shutdown.
        """
        loop = asyncio.get_running_loop()
        try:
            job = loads(unit.raw)
        except InvalidJob as exc:
            await loop.run_in_executor(None, self._bury, unit, exc)
            return
        expiry = self.expiry
        if (
            expiry is not None
            and "expires_at" in job
            and await loop.run_in_executor(None, expiry.dropped, unit, job)
        ):
            return
        cancels = self.cancels
        if (
            cancels is not None
            and cancels.pending(job)
            and await loop.run_in_executor(None, cancels.dropped, unit, job)
        ):
            return
        routing = unit.routing
        followers: list[tuple[UnitOfWork, Payload]] = []
        if routing and routing.coalesced:
            followers = await loop.run_in_executor(None, self._take_followers, unit)
        execution = self._start(unit, job, followers)
        try:
            await self._aperform(execution)
        except asyncio.CancelledError as exc:
            if shutting_down():
                raise
            await loop.run_in_executor(None, self._failed, execution, exc)
            return
        except BaseException as exc:
            await loop.run_in_executor(None, self._failed, execution, exc)
            return
        try:
            result = self._result(execution)
        except ResultNotSerializable as exc:
            await loop.run_in_executor(None, self._failed, execution, exc)
            return
        if followers:
            await loop.run_in_executor(None, self._finished, execution, result)
        else:
            self._finished(execution, result)  # a deferred acknowledgement: no round trip

    def _bury(self, unit: UnitOfWork, exc: InvalidJob) -> None:
        self.job_retry.bury_invalid(unit, exc)
        self.report(exc, {"queue": unit.queue, "context": "invalid job"})

    def _start(
        self, unit: UnitOfWork, job: Payload, followers: list[tuple[UnitOfWork, Payload]]
    ) -> JobRun:
        """Log the start and look the class up (an unknown one fails the execution)."""
        name = job["class"]
        self.job_context.enter(name, job["jid"], unit.queue)  # an async job: in its task
        bid = job.get("bid")
        enter_job(bid if isinstance(bid, str) and bid else None)  # a child batch's parent
        self.job_log.event("start", name, job["jid"], unit.queue, None)
        return JobRun(unit, job, followers, self.registry.get(name), time.perf_counter())

    def _arguments(self, execution: JobRun) -> list[Any]:
        """``perform``'s arguments: the job's own, or a coalesced key's in score order
        (``score``, default ``created_at``; stable): the list of argument lists
        (``coalesce=True``) or the newest one's (``coalesce="last"``)."""
        if not execution.followers:
            routing = execution.unit.routing
            if routing is None or not routing.coalesced:
                return list(execution.job["args"])
        payloads = [execution.job, *(p for _, p in execution.followers)]
        ordered = sorted(payloads, key=lambda p: Routing.of(p).score)
        if execution.job.get("coalesce") == "last":
            return list(ordered[-1]["args"])
        return [[p["args"] for p in ordered]]

    def _control(self, run: JobRun, instance: Job, slot: int) -> None:
        """The execution's deadline and cancel flag, set on the job and registered for the
        timekeeper under ``slot`` (the thread id, or an async job's slot)."""
        work = self.work
        control = JobControl(
            timeout_of(run.job, self.config.job_timeout), self.config.job_timeout_grace,
            stopping=(lambda: work.quiet) if work is not None else lambda: False,
        )
        instance.control = run.control = control
        unit = run.unit
        instance.hold = Hold(CheckpointCommands(unit.fetch.commands), unit.private_key,
                             unit.raw, run.job["jid"])
        instance.progress_writer = self.progress
        if self.work is not None:
            self.work.watch(slot, WatchedExecution(run.unit, run.job, instance, control))

    def _perform(self, execution: JobRun) -> None:
        instance = execution.instantiate()
        self._control(execution, instance, threading.get_ident())
        args = self._arguments(execution)
        chain = self.config.server_middleware
        if not chain:
            execution.value = instance.perform(*args)
            return

        def perform() -> None:
            execution.value = instance.perform(*args)

        run_server_chain(chain, instance, execution.job, execution.unit.queue, perform)

    async def _aperform(self, execution: JobRun) -> None:
        instance = execution.instantiate()
        self._control(execution, instance, id(asyncio.current_task()))
        args = self._arguments(execution)

        async def perform() -> None:
            if instance.is_async:
                execution.value = await cast("Awaitable[object]", instance.perform(*args))
            else:  # not routed here by the manager, but never run a sync job on the loop
                execution.value = await asyncio.get_running_loop().run_in_executor(
                    None, instance.perform, *args
                )

        chain = self.config.server_middleware
        if not chain:
            await perform()
            return
        await run_server_chain_async(chain, instance, execution.job, execution.unit.queue, perform)

    def _failed(self, execution: JobRun, exc: BaseException) -> None:
        if not execution.owned():
            return  # the timekeeper recorded it (hard time limit or cancel)
        unit, job = execution.unit, execution.job
        if isinstance(exc, OverLimit) and self._overlimit(execution, exc):
            return
        if isinstance(exc, DURABLE_ENDS) and durable_end(unit, job, exc):
            return
        name, jid = job["class"], job["jid"]
        elapsed = execution.elapsed_ms()
        log.warning(
            "fail: %s: %s",
            type(exc).__name__,
            exc,
            exc_info=exc,  # with the traceback, as Sidekiq's default error handler logs
            extra={"job_class": name, "jid": jid, "queue": unit.queue, "elapsed_ms": elapsed},
        )
        self.stats.record(name, True, elapsed)
        self.report(exc, {"job": job, "queue": unit.queue, "jid": jid})
        if execution.followers:
            # Back to the head of the key's list, still behind the failed holder: they
            # coalesce again when it is retried (the key stays blocked).
            unit.fetch.requeue([f for f, _ in execution.followers])
        if isinstance(exc, JobCancelled):
            control = execution.control
            self.job_retry.cancel(unit, job, exc, control is not None and control.cancel_to_dead)
            return
        self.job_retry.fail(unit, job, execution.instance, exc)

    def _overlimit(self, execution: JobRun, exc: OverLimit) -> bool:
        """Reschedule a job over a limiter's limit: processed, not failed, no error
        handler (Sidekiq Enterprise's middleware swallows the error the same way); False
        when it reached its maximum and fails normally."""
        unit, job = execution.unit, execution.job
        if self.job_retry.overlimit(unit, job, exc) == "exhausted":
            return False
        if execution.followers:  # back behind the holder, as for a retry
            unit.fetch.requeue([f for f, _ in execution.followers])
        self.stats.record(job["class"], False, execution.elapsed_ms())
        return True

    def _result(self, execution: JobRun) -> str | None:
        """The return value as JSON text for a ``store_result`` job, else None.

        Raises:
            ResultNotSerializable: the value is not native JSON (the execution fails).
        """
        if recorded_ttl(execution.unit) is None:
            return None
        return result_text(execution.value)

    def _finished(self, execution: JobRun, result: str | None = None) -> None:
        if not execution.owned():
            return  # the timekeeper recorded it (hard time limit or cancel)
        unit, job = execution.unit, execution.job
        elapsed = execution.elapsed_ms()
        for follower, _ in execution.followers:
            follower.acknowledge()
        ttl = recorded_ttl(unit)
        if ttl is not None and result is not None:
            # The record and the acknowledgement in one script (complete.lua), deferred
            # like any acknowledgement: pipelined just before the fetcher's next fetch.
            unit = RecordedUnit.of(unit, job["class"], Ending("succeeded", ttl, result=result))
        self.ack(unit)  # a keyed job's release rides on the ack (fetch.lua or finish.lua)
        try:  # the job is done and acknowledged: nothing here may send it back
            self.stats.record(job["class"], False, elapsed)
            self.job_log.event("done", job["class"], job["jid"], unit.queue, elapsed)
        except Exception as exc:
            log.exception("recording the success of jid=%s failed", job["jid"])
            self.report(exc, {"context": "processor", "queue": unit.queue, "jid": job["jid"]})

    def _take_followers(self, unit: UnitOfWork) -> list[tuple[UnitOfWork, Payload]]:
        """Move the key's waiting jobs into the private list (``coalesce.lua``) and parse
        them; an unparseable one goes to the dead set as any invalid job."""
        followers: list[tuple[UnitOfWork, Payload]] = []
        for follower in unit.fetch.take_followers(unit, COALESCE_MAX):
            try:
                payload = loads(follower.raw)
            except InvalidJob as exc:
                self.job_retry.bury_invalid(follower, exc)
                continue
            followers.append((follower, payload))
        return followers
