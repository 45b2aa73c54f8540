"""``RfetchBackend``: Django's task framework (``django.tasks``, or the ``django-tasks``
backport) on rfetch::

    TASKS = {
        "default": {
            "BACKEND": "rfetch.integrations.django.RfetchBackend",
            "QUEUES": ["default", "mail"],
            "OPTIONS": {"result_ttl": 7 * 24 * 3600, "retry": 0},
        }
    }

with ``"rfetch.integrations.django"`` in ``INSTALLED_APPS`` (its ``settings.RFETCH`` is the
Redis, and its client pushes on commit). Tasks run in
``rfetch worker -r rfetch.integrations.django.worker -r myapp.tasks -q default -q mail``.
See docs/integrations.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from django.core import checks
from django.db import transaction
from typing_extensions import ParamSpec

from rfetch.api import Api
from rfetch.errors import ConfigError
from rfetch.integrations.django.apps import app_config
from rfetch.integrations.django.tasks.compat import (
    READY,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    task_enqueued,
)
from rfetch.integrations.django.tasks.results import ResultReader
from rfetch.integrations.django.tasks.runner import DEFAULT_RESULT_TTL, RunTask
from rfetch.integrations.django.tasks.runs import TaskRuns
from rfetch.integrations.django.tasks.times import to_datetime, to_epoch
from rfetch.jobs.workflow_options import MAX_STORE_RESULT
from rfetch.push.client import Client

T = TypeVar("T")
P = ParamSpec("P")

OPTION_NAMES = frozenset({"result_ttl", "retry", "on_commit", "max_scan"})


@dataclasses.dataclass(frozen=True)
class BackendOptions:
    """The backend's ``OPTIONS``.

    Attributes:
        result_ttl: seconds a task's result is kept after it finished (1 .. 90 days).
        retry: rfetch retries of a failed task (0: the first failure is final, ``FAILED``,
            and the job goes to the dead set; an int: that many retries with Sidekiq's
            backoff, the task ``READY`` in between; False: no dead set either).
        on_commit: None follows ``settings.RFETCH["on_commit"]``; False enqueues at once
            even inside ``transaction.atomic()``.
        max_scan: most entries examined per list or set when ``get_result`` looks for a
            task that has not started.
    """

    result_ttl: int = DEFAULT_RESULT_TTL
    retry: bool | int = 0
    on_commit: bool | None = None
    max_scan: int = 10_000

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> BackendOptions:
        """Raises ConfigError for an unknown option or a bad value."""
        unknown = set(values) - OPTION_NAMES
        if unknown:
            raise ConfigError(f"unknown TASKS OPTIONS {sorted(unknown)}; known: "
                              f"{sorted(OPTION_NAMES)}")
        options = cls(**values)
        ttl = options.result_ttl
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 < ttl <= MAX_STORE_RESULT:
            raise ConfigError(f"result_ttl must be whole seconds in 1..{MAX_STORE_RESULT}, "
                              f"got {ttl!r}")
        if not isinstance(options.retry, (bool, int)) or options.retry < 0:
            raise ConfigError(f"retry must be True, False or retries >= 0, got {options.retry!r}")
        if options.on_commit not in (None, True, False):
            raise ConfigError(f"on_commit must be True or False, got {options.on_commit!r}")
        if isinstance(options.max_scan, bool) or not isinstance(options.max_scan, int) \
                or options.max_scan < 1:
            raise ConfigError(f"max_scan must be a whole number >= 1, got {options.max_scan!r}")
        return options


class RfetchBackend(BaseTaskBackend):
    """Django's task backend on rfetch: a task is one rfetch job (class
    ``rfetch.integrations.django.RunTask``, tagged with the task's path) in the queue named
    by its ``queue_name``, with reliable fetch, retries, the dead set and the web UI; its
    ``TaskResult`` is read from rfetch's recorded outcome (``store_result``).

    Supports ``run_after`` (the scheduled set), async task functions (run by
    ``async_to_sync`` in a worker thread), ``get_result`` from any process, and
    ``priority`` (Django's -100..100, higher first): the job's priority inside its queue
    (docs/ordering.md, "Priorities"; 0 is a plain job of the queue's list).

    An enqueue inside ``transaction.atomic()`` is pushed when the transaction commits and
    never if it rolls back (``settings.RFETCH["on_commit"]``, default True; the
    ``on_commit`` option turns it off for this backend).

    Args:
        alias: the backend's name in ``settings.TASKS``.
        params: its settings (``QUEUES``, ``OPTIONS``).

    Raises:
        ConfigError: bad ``OPTIONS``.
    """

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.settings = BackendOptions.parse(self.options)

    def _client(self) -> Client:
        try:
            config = app_config()
        except LookupError:
            raise ConfigError(
                "RfetchBackend needs 'rfetch.integrations.django' in INSTALLED_APPS"
            ) from None
        if len(config.client.deliveries) > 1:
            raise ConfigError("RfetchBackend reads results on one Redis: shards are not "
                              "supported")
        if self.settings.on_commit is False:
            return config.immediate_client()
        return config.client

    def enqueue(
        self,
        task: Task[P, T],
        args: P.args,  # type: ignore[valid-type]
        kwargs: P.kwargs,  # type: ignore[valid-type]
    ) -> TaskResult[T]:
        """Push the task (at the commit of the open transaction, if any).

        Raises:
            InvalidTask: the task does not fit this backend (priority, queue, run_after).
            rfetch.ArgsNotSerializable: an argument is not native JSON.
        """
        self.validate_task(task)
        client = self._client()
        setter = RunTask.set(
            queue=task.queue_name, store_result=self.settings.result_ttl,
            retry=self.settings.retry, tags=[task.module_path], client=client,
            priority=int(task.priority),
        )
        call = (task.module_path, list(args), dict(kwargs))
        if task.run_after is not None:
            jid = setter.perform_at(to_epoch(task.run_after), *call)
        else:
            jid = setter.perform_async(*call)
        if jid is None:  # a client middleware dropped the push
            raise InvalidTask(f"the push of {task.module_path} was stopped by client middleware")
        result: TaskResult[T] = TaskResult(
            task=task, id=jid, status=READY,
            enqueued_at=to_datetime(time.time()), started_at=None, finished_at=None,
            last_attempted_at=None, args=list(args), kwargs=dict(kwargs), backend=self.alias,
            errors=[], worker_ids=[],
        )
        self._announce(client, result)
        return result

    def _announce(self, client: Client, result: TaskResult[Any]) -> None:
        """Send ``task_enqueued`` when the push is written: at commit for a deferred one."""
        def send() -> None:
            task_enqueued.send(sender=type(self), task_result=result)

        database = getattr(client.sink, "database", None)
        if isinstance(database, str):
            transaction.on_commit(send, using=database)
        else:
            send()

    def get_result(self, result_id: str) -> TaskResult[Any]:
        """The task's result now, from any process (one or two HGETALLs; an ``explain``
        bounded by ``max_scan`` for a task that has not started).

        Raises:
            TaskResultDoesNotExist: no such task, or its result expired (``result_ttl``).
        """
        client = self._client()
        api = Api(client.config, redis=client.redis)
        runs = TaskRuns(client.redis, client.keys)
        return ResultReader(api, runs, self.alias, self.settings.max_scan).read(result_id)

    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        """Django's system check: the rfetch app must be installed."""
        from django.apps import apps

        if not apps.is_installed("rfetch.integrations.django"):
            yield checks.Error(
                f"TASKS[{self.alias!r}] uses RfetchBackend, which needs "
                "'rfetch.integrations.django' in INSTALLED_APPS",
                id="rfetch.E001",
            )
