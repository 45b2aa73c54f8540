"""Running a fake or inline job as a worker's processor would: the job class found by its
registered name, a fresh instance with its ``jid``, the server middleware, ``perform``."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from typing import Any, cast

from rfetch.config import Config
from rfetch.errors import UnknownJob
from rfetch.jobs.job import Job
from rfetch.jobs.middleware import run_coroutine, run_server_chain, run_server_chain_async
from rfetch.jobs.payload import Payload
from rfetch.push.buffer import BufferedJob


def find_job_class(name: str) -> type[Job]:
    """The job class registered under ``name`` among every Job subclass defined so far.

    When several classes claim the name (a test module defining the same class in a
    parametrised test), the one defined last wins.

    Raises:
        UnknownJob: no class has that name (a worker would fail the job the same way).
    """
    found: type[Job] | None = None
    pending: list[type[Job]] = list(Job.__subclasses__())
    while pending:
        cls = pending.pop(0)
        pending.extend(cls.__subclasses__())
        if cls.perform is not Job.perform and cls.job_name() == name:
            found = cls
    if found is None:
        raise UnknownJob(f"no job class named {name!r} is defined in this process")
    return found


def read_job(job: BufferedJob) -> Payload:
    """A pushed job as a worker reads it: parsed from its JSON text, ``at`` put back."""
    payload: Payload = json.loads(job.text)
    if job.at is not None:
        payload["at"] = job.at
    return payload


class JobRunner:
    """Runs one payload in the calling thread, as a worker's processor would: a fresh
    instance with its ``jid``, through ``config.server_middleware``, ``perform(*args)``.

    An async job (``async def perform``) goes through the async form of the chain
    (:func:`rfetch.jobs.middleware.run_server_chain_async`): :meth:`run` runs it to its end on a
    fresh event loop (:func:`rfetch.jobs.middleware.run_coroutine`), :meth:`arun` awaits it in
    the caller's loop.

    Args:
        config: the server middleware to run the job through.
    """

    def __init__(self, config: Config) -> None:
        self.config = config

    def run(self, payload: Payload, args: Sequence[Any] | None = None) -> None:
        """Run ``payload``'s job (with ``args`` in place of its own, for coalesced runs).

        Raises:
            UnknownJob: no class of that name is defined.
            Exception: whatever the job or a middleware raises (no retry).
        """
        instance, values = self._instance(payload, args)
        if instance.is_async:
            run_coroutine(lambda: self._chain_async(instance, payload, values))
            return
        chain = self.config.server_middleware
        run_server_chain(chain, instance, payload, payload["queue"],
                         lambda: instance.perform(*values))

    async def arun(self, payload: Payload, args: Sequence[Any] | None = None) -> None:
        """:meth:`run` for a caller inside an event loop: an async job is awaited here, a
        sync job runs in this thread (blocking the loop while it runs, as a test may)."""
        instance, values = self._instance(payload, args)
        if instance.is_async:
            await self._chain_async(instance, payload, values)
        else:
            self.run(payload, args)

    def _instance(self, payload: Payload, args: Sequence[Any] | None) -> tuple[Job, Sequence[Any]]:
        instance = find_job_class(payload["class"])()
        instance.jid = payload["jid"]
        return instance, payload["args"] if args is None else args

    async def _chain_async(self, instance: Job, payload: Payload, values: Sequence[Any]) -> None:
        async def perform() -> None:
            await cast("Awaitable[object]", instance.perform(*values))

        chain = self.config.server_middleware
        await run_server_chain_async(chain, instance, payload, payload["queue"], perform)
