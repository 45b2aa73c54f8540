"""One job execution: parse, look up the class, middleware, perform, then ack or retry."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rfetch.config import Config
from rfetch.errors import InvalidJob, JobCancelled, UnknownJob
from rfetch.job import Job
from rfetch.limits import JobControl, timeout_of
from rfetch.log_context import JobContext
from rfetch.logs import JobLog
from rfetch.middleware import run_server_chain
from rfetch.payload import Payload, Routing, loads
from rfetch.stats import Stats
from rfetch.worker.registry import Registry
from rfetch.worker.reporting import ErrorReporter
from rfetch.worker.retry import JobRetry
from rfetch.worker.unit import UnitOfWork
from rfetch.worker.work_state import Execution, WorkState

log = logging.getLogger("rfetch.job")

COALESCE_MAX = 1000
"""Waiting jobs of a key merged into one execution at most; the rest form the next one."""


class Processor:
    """Runs fetched jobs; shared by the pool's threads (it keeps no per-job state).

    Sidekiq's ``Processor#process``: parse, look up the class, server middleware, perform,
    then acknowledge (success) or hand the failure to :class:`JobRetry`.

    Each execution gets a :class:`~rfetch.limits.JobControl` (its time limit, from the
    payload's ``timeout`` or ``config.job_timeout``, and its cancel flag), registered in
    ``work`` for the timekeeper. A job raising ``rfetch.JobCancelled`` is recorded as
    cancelled (never retried); a job whose outcome the timekeeper already recorded (the hard
    path) is left alone when its thread comes back.

    Args:
        config: server middleware, ``job_timeout`` and ``job_timeout_grace``.
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
    """

    def __init__(
        self,
        config: Config,
        registry: Registry,
        job_retry: JobRetry,
        stats: Stats,
        report: ErrorReporter,
        ack: Callable[[UnitOfWork], object] = UnitOfWork.acknowledge,
        work: WorkState | None = None,
        job_context: JobContext | None = None,
    ) -> None:
        self.config = config
        self.work = work
        self.registry = registry
        self.job_retry = job_retry
        self.stats = stats
        self.report = report
        self.ack = ack
        self.job_log = JobLog(log)
        self.job_context = job_context or JobContext()

    def process(self, unit: UnitOfWork) -> None:
        """Run one job to its end: acknowledged, in the retry/dead set, or discarded.

        Never raises for a job's own failure; the worker thread goes on. The job is marked
        as running (:class:`JobContext`) in a copy of the thread's context, dropped at the
        end, so no record logged after it carries its jid.

        Args:
            unit: the fetched job.
        """
        contextvars.copy_context().run(self._process, unit)

    def _process(self, unit: UnitOfWork) -> None:
        try:
            job = loads(unit.raw)
        except InvalidJob as exc:
            self.job_retry.bury_invalid(unit, exc)
            self.report(exc, {"queue": unit.queue, "context": "invalid job"})
            return
        name = job["class"]
        jid = job["jid"]
        routing = unit.routing
        coalesced = routing is not None and routing.coalesced
        followers = self._take_followers(unit) if coalesced else []
        self.job_context.enter(name, jid, unit.queue)
        job_log = self.job_log
        job_log.event("start", name, jid, unit.queue, None)
        started = time.perf_counter()
        instance: Job | None = None
        control: JobControl | None = None
        try:
            cls = self.registry.get(name)
            if cls is None:
                raise UnknownJob(
                    f"no job named {name!r} is registered in this worker (is the module that "
                    "defines it passed with -r, and deployed?)"
                )
            instance = cls()
            instance.jid = jid
            control = self._control(unit, job, instance)
            if coalesced:
                last = routing is not None and routing.coalesce == "last"
                self._perform_coalesced(instance, job, unit.queue, followers, last)
            else:
                self._perform(instance, job, unit.queue)
        except BaseException as exc:  # a job's failure, whatever it raised, is a retry
            if control is not None and not control.finish():
                return  # the timekeeper recorded it (hard time limit or cancel)
            elapsed = round((time.perf_counter() - started) * 1000, 3)
            # With the traceback, as Sidekiq's default error handler logs a failure.
            log.warning(
                "fail: %s: %s",
                type(exc).__name__,
                exc,
                exc_info=exc,
                extra={"job_class": name, "jid": jid, "queue": unit.queue, "elapsed_ms": elapsed},
            )
            self.stats.record(name, True, elapsed)
            self.report(exc, {"job": job, "queue": unit.queue, "jid": job["jid"]})
            if followers:
                # Back to the head of the key's list, still behind the failed holder: they
                # coalesce again when it is retried (the key stays blocked).
                unit.fetch.requeue([f for f, _ in followers])
            if isinstance(exc, JobCancelled):
                dead = control is not None and control.cancel_to_dead
                self.job_retry.cancel(unit, job, exc, dead)
                return
            self.job_retry.fail(unit, job, instance, exc)
            return
        if control is not None and not control.finish():
            return  # the timekeeper recorded it (hard time limit or cancel)
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        for follower, _ in followers:
            follower.acknowledge()
        self.ack(unit)  # a keyed job's release rides on the ack (fetch.lua or finish.lua)
        self.stats.record(name, False, elapsed)
        job_log.event("done", name, jid, unit.queue, elapsed)

    def _control(self, unit: UnitOfWork, job: Payload, instance: Job) -> JobControl:
        """The execution's deadline and cancel flag, set on the job and registered for the
        timekeeper."""
        control = JobControl(
            timeout_of(job, self.config.job_timeout), self.config.job_timeout_grace
        )
        instance.control = control
        if self.work is not None:
            self.work.watch(threading.get_ident(), Execution(unit, job, instance, control))
        return control

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

    def _perform_coalesced(
        self,
        instance: Job,
        job: Payload,
        queue: str,
        followers: list[tuple[UnitOfWork, Payload]],
        last: bool,
    ) -> None:
        """One execution for the holder and its followers, in score order (``score``,
        default ``created_at``; stable): ``perform(batch)`` with the list of argument
        lists (``coalesce=True``), or ``perform(*args)`` of the newest (``last``:
        ``coalesce="last"``)."""
        payloads = [job, *(p for _, p in followers)]
        ordered = sorted(payloads, key=lambda p: Routing.of(p).score)
        args = ordered[-1]["args"] if last else [
            [p["args"] for p in ordered]
        ]

        def call() -> None:
            instance.perform(*args)

        chain = self.config.server_middleware
        if not chain:
            call()
            return
        run_server_chain(chain, instance, job, queue, call)

    def _perform(self, instance: Job, job: dict[str, Any], queue: str) -> None:
        args = job["args"]
        chain = self.config.server_middleware
        if not chain:
            instance.perform(*args)
            return
        run_server_chain(chain, instance, job, queue, lambda: instance.perform(*args))

