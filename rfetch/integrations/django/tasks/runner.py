"""The worker side of Django tasks: one job class, :class:`RunTask`, runs every task, and
the server middleware :class:`TaskRunner` (added by ``rfetch.integrations.django.worker``)
finds the task in an allow-list and records each attempt (:mod:`.runs`).

The payload names a task by its module path; the worker never imports it. The allow-list
(:class:`TaskRegistry`) holds the ``Task`` objects that exist in the worker once the ``-r``
modules are imported, the same rule as for job classes (rfetch.worker.registry): a path
that is not in it fails the job with :class:`UnknownTask`.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from rfetch.errors import ConfigError, RfetchError
from rfetch.integrations.django.tasks.compat import (
    FAILED,
    RUNNING,
    SUCCESSFUL,
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    task_finished,
    task_started,
)
from rfetch.integrations.django.tasks.runs import Attempts, TaskRuns
from rfetch.integrations.django.tasks.times import to_datetime
from rfetch.jobs.job import Job
from rfetch.jobs.middleware import AsyncNext

log = logging.getLogger("rfetch.django.tasks")

JOB_NAME = "rfetch.integrations.django.RunTask"
"""The registered name of :class:`RunTask` (the ``class`` of every Django task's payload)."""

DEFAULT_RESULT_TTL = 7 * 24 * 3600
"""Seconds a task's result is kept when the backend's ``result_ttl`` is not set."""


class UnknownTask(RfetchError):
    """The payload names a task the worker does not have: its module was not imported by
    the worker's ``-r`` modules, or the name is not a ``@task``."""


class RunTask(Job):
    """Runs one Django task: ``perform(path, args, kwargs)``. Pushed by
    :class:`~rfetch.integrations.django.tasks.backend.RfetchBackend`; the task itself and
    its context are handed over by :class:`TaskRunner` before ``perform``.

    ``retry`` is 0 here (a failure is final, in the dead set, as Django's ``FAILED``); the
    backend's ``retry`` option overrides it per push.
    """

    name = JOB_NAME
    retry = 0

    task: Task[Any, Any] | None = None
    """The task to run, found by :class:`TaskRunner` in its allow-list."""
    task_result: TaskResult[Any] | None = None
    """The running result (``RUNNING``), for a task that ``takes_context``."""

    def perform(self, path: str, args: list[Any], kwargs: dict[str, Any]) -> object:
        """Call the task and return its return value as native JSON.

        Raises:
            ConfigError: the worker was not started with
                ``-r rfetch.integrations.django.worker`` (no :class:`TaskRunner`).
            TypeError: the return value is not JSON.
            Exception: whatever the task raises.
        """
        if self.task is None or self.task_result is None:
            raise ConfigError(
                f"task {path!r}: Django tasks run only in a worker started with "
                "-r rfetch.integrations.django.worker"
            )
        if self.task.takes_context:
            value = self.task.call(TaskContext(task_result=self.task_result), *args, **kwargs)
        else:
            value = self.task.call(*args, **kwargs)
        return json.loads(json.dumps(value))


class TaskRegistry:
    """Module path -> Task: the allow-list of tasks a worker runs.

    Args:
        tasks: the Task objects.
    """

    def __init__(self, tasks: Iterable[Task[Any, Any]]) -> None:
        self._by_path = {t.module_path: t for t in tasks}

    @classmethod
    def from_loaded(cls) -> TaskRegistry:
        """Every ``Task`` defined at module level by a module imported so far."""
        found: list[Task[Any, Any]] = []
        for module in list(sys.modules.values()):
            try:
                values = list(vars(module).values())
            except TypeError:  # a module stand-in without __dict__
                continue
            # type(), not isinstance(): isinstance reads __class__, which evaluates a lazy
            # object (Django's LazyObject) that a module holds.
            found.extend(v for v in values if issubclass(type(v), Task))
        return cls(found)

    def get(self, path: str) -> Task[Any, Any]:
        """The task at ``path``.

        Raises:
            UnknownTask: not in the allow-list.
        """
        task = self._by_path.get(path)
        if task is None:
            raise UnknownTask(
                f"task {path!r} is not defined by the modules this worker imported "
                "(add its module with -r); the worker never imports what a payload names"
            )
        return task

    def paths(self) -> list[str]:
        """The module paths, sorted."""
        return sorted(self._by_path)


def task_call(payload: Mapping[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    """The task path, args and kwargs of a :class:`RunTask` payload.

    Raises:
        ValueError: the payload's args are not ``[path, [args...], {kwargs...}]``.
    """
    args = payload.get("args")
    if (
        not isinstance(args, list) or len(args) != 3 or not isinstance(args[0], str)
        or not isinstance(args[1], list) or not isinstance(args[2], dict)
    ):
        raise ValueError(f"a Django task's payload args are [path, args, kwargs], got {args!r}")
    return args[0], args[1], args[2]


def worker_id() -> str:
    """This process as Django's ``worker_ids`` name it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def error_of(exc: BaseException) -> dict[str, str]:
    """A failure as Django's ``TaskError`` fields (the class's dotted path, the traceback)."""
    cls = type(exc)
    return {
        "exception_class_path": f"{cls.__module__}.{cls.__qualname__}",
        "traceback": "".join(traceback.format_exception(exc)),
    }


def running_result(task: Task[Any, Any], jid: str, a: Attempts) -> TaskResult[Any]:
    """The ``RUNNING`` TaskResult of an attempt (a task's context, and the signals')."""
    return TaskResult(
        task=task, id=jid, status=RUNNING,
        enqueued_at=to_datetime(a.enqueued_at), started_at=to_datetime(a.started_at),
        finished_at=None, last_attempted_at=to_datetime(a.last_attempted_at),
        args=a.args, kwargs=a.kwargs, backend=task.backend,
        errors=[TaskError(**e) for e in a.errors], worker_ids=list(a.worker_ids),
    )


class TaskRunner:
    """Server middleware: for a :class:`RunTask`, records the attempt's start (before the
    task runs: an attempt that cannot be recorded does not run, and is retried), finds the
    task, sends Django's ``task_started`` and ``task_finished`` signals, and records the
    failure's traceback or the end. Other jobs pass through.

    Args:
        tasks: the allow-list.
        runs: where attempts are written.
    """

    def __init__(self, tasks: TaskRegistry, runs: TaskRuns) -> None:
        self.tasks = tasks
        self.runs = runs

    def __call__(
        self, job: Job, payload: dict[str, Any], queue: str, call_next: Callable[[], None]
    ) -> None:
        if not isinstance(job, RunTask):
            call_next()
            return
        self._run(job, payload, call_next)

    async def acall(self, job: Job, payload: dict[str, Any], queue: str,
                    call_next: AsyncNext) -> None:
        """Async jobs are never Django tasks (:class:`RunTask` is sync): pass through."""
        await call_next()

    def _run(self, job: RunTask, payload: dict[str, Any], call_next: Callable[[], None]) -> None:
        path, args, kwargs = task_call(payload)
        ttl = int(payload.get("store_result") or DEFAULT_RESULT_TTL)
        before = self.runs.read(job.jid)
        now = time.time()
        enqueued = payload.get("enqueued_at") or payload.get("created_at")
        attempts = Attempts(
            task=path, args=args, kwargs=kwargs,
            enqueued_at=float(enqueued) if isinstance(enqueued, (int, float)) else None,
            started_at=before.started_at if before and before.started_at else now,
            last_attempted_at=now,
            worker_ids=[*(before.worker_ids if before else []), worker_id()],
            errors=list(before.errors) if before else [],
        )
        self.runs.started(job.jid, attempts, ttl)
        task: Task[Any, Any] | None = None
        try:
            task = self.tasks.get(path)
            job.task, job.task_result = task, running_result(task, job.jid, attempts)
            task_started.send(sender=type(task.get_backend()), task_result=job.task_result)
            call_next()
        except BaseException as exc:
            attempts = replace(attempts, errors=[*attempts.errors, error_of(exc)])
            self._end(job.jid, attempts, "failed", ttl)
            self._finished(task, job, attempts, FAILED)
            raise
        self._end(job.jid, attempts, "finished", ttl)
        self._finished(task, job, attempts, SUCCESSFUL)

    def _end(self, jid: str, attempts: Attempts, state: str, ttl: int) -> None:
        try:
            self.runs.ended(jid, attempts, state, ttl)
        except Exception as exc:  # the outcome itself is rfetch's record: never lost
            log.warning("jid=%s: the end of the attempt was not recorded: %r", jid, exc)

    def _finished(self, task: Task[Any, Any] | None, job: RunTask, a: Attempts,
                  status: TaskResultStatus) -> None:
        if task is None:
            return
        result = running_result(task, job.jid, a)
        object.__setattr__(result, "status", status)
        object.__setattr__(result, "finished_at", to_datetime(time.time()))
        try:
            task_finished.send(sender=type(task.get_backend()), task_result=result)
        except Exception as exc:
            log.warning("jid=%s: a task_finished receiver raised %r", job.jid, exc)
