"""One job execution: parse, look up the class, the server steps around ``perform``, then
ack or retry."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Literal, cast

from rfetch.errors import InvalidJob, JobCancelled
from rfetch.jobs.job import Job
from rfetch.jobs.job_control import JobControl, timeout_of
from rfetch.jobs.payload import loads
from rfetch.observability.logs import JobLog
from rfetch.worker.context import WorkerContext
from rfetch.worker.job_run import JobRun
from rfetch.worker.registry import Registry
from rfetch.worker.retry import JobRetry
from rfetch.worker.steps import Steps
from rfetch.worker.unit import UnitOfWork
from rfetch.worker.work_state import Execution as WatchedExecution

log = logging.getLogger("rfetch.job")

Handled = Literal["done", "rfetch-failed", "stuck"]
"""How :meth:`Processor.process` left a job (see there)."""


class Processor:
    """Runs fetched jobs; shared by the pool's threads (it keeps no per-job state).

    Sidekiq's ``Processor#process``: parse, look up the class, the server steps around
    ``perform`` (:mod:`rfetch.worker.server_steps`: expiry, cancel-before-start,
    coalescing, ..., the user's server middleware innermost), then acknowledge (success)
    or hand the failure to :class:`JobRetry`.

    Each execution gets a :class:`~rfetch.jobs.job_control.JobControl` (its time limit, from the
    payload's ``timeout`` or ``config.job_timeout``, and its cancel flag), registered in
    the context's ``work`` for the timekeeper under its thread's id (an async job's: its
    task's slot). A job raising ``rfetch.JobCancelled`` is recorded as cancelled (never
    retried); a job whose outcome the timekeeper already recorded (the hard path) is left
    alone when it comes back.

    Args:
        context: config, stats, error reporter, work state and the log context of the
            running job.
        registry: the job classes this worker may run.
        job_retry: records failures.
        steps: the server steps, in order (:func:`rfetch.worker.server_steps.server_steps`).
        ack: acknowledges a finished job (default :meth:`UnitOfWork.acknowledge`, at once;
            a worker passes its :class:`rfetch.worker.acks.DeferredAcks`, which rides on
            the next fetch).
    """

    def __init__(
        self,
        context: WorkerContext,
        registry: Registry,
        job_retry: JobRetry,
        steps: Steps,
        ack: Callable[[UnitOfWork], object] = lambda unit: unit.acknowledge(),
    ) -> None:
        self.config = context.config
        self.work = context.work
        self.stats = context.stats
        self.report = context.report
        self.job_context = context.job_context
        self.registry = registry
        self.job_retry = job_retry
        self.steps = steps
        self.ack = ack
        self.job_log = JobLog(log)

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
            run = JobRun(unit, loads(unit.raw))
        except InvalidJob as exc:
            self._bury(unit, exc)
            return
        if self.steps.start(run) is not None:
            return  # ended before it started (expired, cancelled): the step wrote it
        self._start(run)
        try:
            self._perform(run)
            self.steps.finish(run)
        except BaseException as exc:  # a job's failure, whatever it raised, is a retry
            self._failed(run, exc)
            return
        self._finished(run)

    async def aprocess(
        self,
        unit: UnitOfWork,
        shutting_down: Callable[[], bool],
        ack: Callable[[UnitOfWork], object] | None = None,
        slot: int | None = None,
    ) -> None:
        """:meth:`process` for an async job, on the worker's event loop: ``perform`` and the
        server middleware are awaited; what waits on Redis (a step before the start, a
        failure's retry, an invalid payload, a coalesced key's followers) runs in the
        loop's executor, so the loop never waits for it.

        Args:
            unit: the fetched job.
            shutting_down: whether the worker cancelled its async jobs (TERM past the
                timeout); a job cancelled then is left in the private list, to be pushed
                back, instead of failing. A job that raises ``CancelledError`` by itself
                fails as any other exception.
            ack: the acknowledgement of a job that succeeded, called in the loop (it must
                not wait on Redis: :class:`rfetch.worker.event_loop.AsyncPool` defers it or
                sends it from the executor); default the processor's own.
            slot: the job's slot for the timekeeper (default the id of the current task).

        Raises:
            asyncio.CancelledError: cancelled at shutdown.
        """
        loop = asyncio.get_running_loop()
        try:
            run = JobRun(unit, loads(unit.raw))
        except InvalidJob as exc:
            await loop.run_in_executor(None, self._bury, unit, exc)
            return
        if await self.steps.astart(run) is not None:
            return
        self._start(run)
        try:
            await self._aperform(run, id(asyncio.current_task()) if slot is None else slot)
        except asyncio.CancelledError as exc:
            if shutting_down():
                raise
            await loop.run_in_executor(None, self._failed, run, exc)
            return
        except BaseException as exc:
            await loop.run_in_executor(None, self._failed, run, exc)
            return
        try:
            self.steps.finish(run)
        except Exception as exc:
            await loop.run_in_executor(None, self._failed, run, exc)
            return
        if run.followers:
            await loop.run_in_executor(None, self._finished, run)
        else:
            self._finished(run, ack)  # a deferred acknowledgement: no round trip

    def _bury(self, unit: UnitOfWork, exc: InvalidJob) -> None:
        self.job_retry.bury_invalid(unit, exc)
        self.report(exc, {"queue": unit.queue, "context": "invalid job"})

    def _start(self, run: JobRun) -> None:
        """Log the start and look the class up (an unknown one fails the execution)."""
        job = run.job
        name = job["class"]
        self.job_context.enter(name, job["jid"], run.unit.queue)  # an async job: in its task
        self.job_log.event("start", name, job["jid"], run.unit.queue, None)
        run.cls = self.registry.get(name)
        run.started = time.perf_counter()

    def _control(self, run: JobRun, instance: Job, slot: int) -> None:
        """The execution's deadline and cancel flag, set on the job and registered for the
        timekeeper under ``slot`` (the thread id, or an async job's slot); then the
        steps' ``begin`` and ``perform``'s arguments."""
        work = self.work
        control = JobControl(
            timeout_of(run.job, self.config.job_timeout), self.config.job_timeout_grace,
            stopping=lambda: work.quiet,
        )
        instance.control = run.control = control
        work.watch(slot, WatchedExecution(run.unit, run.job, instance, control))
        run.args = list(run.job["args"])
        self.steps.prepare(run, instance)

    def _perform(self, run: JobRun) -> None:
        instance = run.instantiate()
        self._control(run, instance, threading.get_ident())
        args = run.args

        def perform() -> None:
            run.value = instance.perform(*args)

        self.steps.perform(run, instance, perform)

    async def _aperform(self, run: JobRun, slot: int) -> None:
        instance = run.instantiate()
        self._control(run, instance, slot)
        args = run.args
        if instance.is_async and not self.steps.wrapping(run):
            # No step wraps this job (no server middleware): ``perform`` is awaited here,
            # so each resumption of the job crosses two coroutines fewer.
            run.value = await cast("Awaitable[object]", instance.perform(*args))
            return

        async def perform() -> None:
            if instance.is_async:
                run.value = await cast("Awaitable[object]", instance.perform(*args))
            else:  # not routed here by the manager, but never run a sync job on the loop
                run.value = await asyncio.get_running_loop().run_in_executor(
                    None, instance.perform, *args
                )

        await self.steps.aperform(run, instance, perform)

    def _failed(self, run: JobRun, exc: BaseException) -> None:
        if not run.owned():
            return  # the timekeeper recorded it (hard time limit or cancel)
        if self.steps.take(run, exc) is not None:
            return  # a step took it over (rescheduled, interrupted, ...)
        unit, job = run.unit, run.job
        name, jid = job["class"], job["jid"]
        elapsed = run.elapsed_ms()
        log.warning(
            "fail: %s: %s",
            type(exc).__name__,
            exc,
            exc_info=exc,  # with the traceback, as Sidekiq's default error handler logs
            extra={"job_class": name, "jid": jid, "queue": unit.queue, "elapsed_ms": elapsed},
        )
        self.stats.record(name, True, elapsed)
        self.report(exc, {"job": job, "queue": unit.queue, "jid": jid})
        self.steps.leave(run, "failed")
        if isinstance(exc, JobCancelled):
            control = run.control
            self.job_retry.cancel(unit, job, exc, control is not None and control.cancel_to_dead)
            return
        self.job_retry.fail(unit, job, run.instance, exc)

    def _finished(self, run: JobRun, ack: Callable[[UnitOfWork], object] | None = None) -> None:
        if not run.owned():
            return  # the timekeeper recorded it (hard time limit or cancel)
        job = run.job
        elapsed = run.elapsed_ms()
        self.steps.leave(run, "succeeded")
        unit = run.ack_as or run.unit
        # a keyed job's release rides on the ack (fetch.lua or finish.lua)
        (self.ack if ack is None else ack)(unit)
        try:  # the job is done and acknowledged: nothing here may send it back
            self.stats.record(job["class"], False, elapsed)
            self.job_log.event("done", job["class"], job["jid"], unit.queue, elapsed)
        except Exception as exc:
            log.exception("recording the success of jid=%s failed", job["jid"])
            self.report(exc, {"context": "processor", "queue": unit.queue, "jid": job["jid"]})
