"""Django's ``TaskResult`` read back from Redis: rfetch's record of the outcome
(``store_result``: ``rfetch:result:<jid>``), the worker's attempts hash (:mod:`.runs`) and,
for a task that has not started yet, the job's payload where it waits (``explain``).

Statuses: a record that says ``succeeded`` is ``SUCCESSFUL`` (its return value); ``dead``
or ``cancelled`` is ``FAILED`` (its errors); no record and an attempt running is
``RUNNING``; an attempt that failed and waits for its retry, or a job not started (queued,
scheduled, fetched but not running), is ``READY``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string

from rfetch.api import Api
from rfetch.integrations.django.tasks.compat import (
    FAILED,
    READY,
    RUNNING,
    SUCCESSFUL,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from rfetch.integrations.django.tasks.runner import JOB_NAME, task_call
from rfetch.integrations.django.tasks.runs import Attempts, TaskRuns
from rfetch.integrations.django.tasks.times import to_datetime
from rfetch.workflow.record import Record, read_record

PENDING = frozenset(
    {"running", "queued", "held", "scheduled", "retry", "waiting_key", "waiting_cap"}
)
"""``explain`` states of a job that runs or will run. ``running`` with no attempt recorded
is the moment between a worker taking the job and its middleware recording the start."""


PASSES = 3
"""Looks for a task found nowhere before it is said not to exist."""


@dataclass(frozen=True)
class ResultReader:
    """Reads one backend's task results.

    Attributes:
        api: the admin API of the tasks' Redis (records, explain).
        runs: the attempts hashes.
        alias: the backend's alias (``TaskResult.backend``).
        max_scan: most entries ``explain`` examines per list or set for a task not started.
    """

    api: Api
    runs: TaskRuns
    alias: str
    max_scan: int

    def read(self, jid: str) -> TaskResult[Any]:
        """The task result of ``jid``.

        Raises:
            TaskResultDoesNotExist: no such task (never enqueued, rolled back, or its
                record expired), or its task cannot be imported in this process.
        """
        record, attempts = self._look(jid)
        if attempts is None:
            why = "its outcome is recorded, but not the task" if record else "no such task"
            raise TaskResultDoesNotExist(f"{jid}: {why}")
        result: TaskResult[Any] = TaskResult(
            task=self._task(jid, attempts.task), id=jid, status=_status(record, attempts),
            enqueued_at=to_datetime(attempts.enqueued_at),
            started_at=to_datetime(attempts.started_at),
            finished_at=to_datetime(record.finished_at) if record else None,
            last_attempted_at=to_datetime(attempts.last_attempted_at),
            args=attempts.args, kwargs=attempts.kwargs, backend=self.alias,
            errors=_errors(record, attempts), worker_ids=list(attempts.worker_ids),
        )
        if record is not None and record.status == "succeeded":
            object.__setattr__(result, "_return_value", record.value)
        return result

    def _look(self, jid: str) -> tuple[Record | None, Attempts | None]:
        """The record and the attempts of ``jid``. ``explain`` looks at one place after
        another, so a job moving meanwhile (from its queue to a worker's private list, or
        starting) can be missed once: a job found nowhere is looked for again, up to
        :data:`PASSES` times."""
        for _ in range(PASSES):
            record = read_record(self.api.redis, self.api.keys, jid)
            attempts = self.runs.read(jid)
            if attempts is None:
                attempts = self._waiting(jid)
            if record is not None or attempts is not None:
                break
        return record, attempts

    def _waiting(self, jid: str) -> Attempts | None:
        """The attempts of a task that has not started, from its payload where it waits."""
        found = self.api.explain(jid, max_scan=self.max_scan)
        for location in found.locations:
            payload = location.job.payload if location.job is not None else None
            if location.state not in PENDING or not payload or payload.get("class") != JOB_NAME:
                continue
            try:
                path, args, kwargs = task_call(payload)
            except ValueError:
                continue
            enqueued = payload.get("enqueued_at") or payload.get("created_at")
            return Attempts(
                task=path, args=args, kwargs=kwargs,
                enqueued_at=float(enqueued) if isinstance(enqueued, (int, float)) else None,
                state="running" if location.state == "running" else "",
            )
        return None

    def _task(self, jid: str, path: str) -> Task[Any, Any]:
        try:
            task = import_string(path)
        except ImportError:
            task = None
        if not isinstance(task, Task):
            raise TaskResultDoesNotExist(
                f"{jid}: its task {path!r} is not a task importable in this process"
            )
        return task


def _status(record: Record | None, attempts: Attempts) -> TaskResultStatus:
    if record is not None:
        ok = record.status == "succeeded"
        return SUCCESSFUL if ok else FAILED
    if attempts.state in ("running", "finished"):  # "finished": its record is on the way
        return RUNNING
    return READY


def _errors(record: Record | None, attempts: Attempts) -> list[TaskError]:
    """The errors of each failed attempt; a death the worker's middleware did not see (a
    time limit, a cancel, a crash) adds rfetch's recorded class and message."""
    errors = [TaskError(**e) for e in attempts.errors]
    if record is not None and record.status != "succeeded" and attempts.state != "failed":
        cls = record.error_class or "rfetch.errors.JobDied"
        errors.append(TaskError(
            exception_class_path=cls if "." in cls else f"builtins.{cls}",
            traceback=f"{record.error_class}: {record.error_message}",
        ))
    return errors
