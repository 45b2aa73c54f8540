"""Test modes: Sidekiq::Testing's ``fake!`` and ``inline!``, in Python form.

In your tests, push as the application does; the jobs do not reach Redis::

    from rfetch import testing

    def test_signup() -> None:
        with testing.fake() as queues:
            signup("ann@example.com")                  # calls SendWelcome.perform_async(...)
            assert [j["args"] for j in queues.jobs(SendWelcome)] == [[42, "welcome"]]
            queues.drain()                             # runs them here, through the server
                                                       # middleware, with retries off

    with testing.inline():
        SendWelcome.perform_async(42, "welcome")       # runs at once, in this thread

With pytest, the fixtures ``rfetch_fake`` and ``rfetch_inline`` (from the ``rfetch`` pytest
plugin, loaded when rfetch is installed) do the same for one test.

Both modes build a :class:`rfetch.Client` that is given a sink (:mod:`rfetch.sink`) in
place of Redis and make it the process-wide default client for the block, putting the
previous one back at the end. Everything before the write still happens as in production:
argument checks (native JSON only: ``ArgsNotSerializable``), option checks, keyword
arguments bound to ``perform``'s parameters, ordering key and tenant, the client
middleware, and the payload size limit; each job is then read back from its JSON text, so
a job sees exactly what a worker would. A Client you built yourself is not replaced: give
it a sink of its own, ``Client(config, sink=testing.FakeQueues(config))``.

What differs from a worker: jobs run in the calling thread; an exception raised by a job
propagates to the caller (Sidekiq::Testing's drain does the same) and nothing is retried;
scheduled jobs (``perform_in``/``perform_at``) are kept with their ``at`` time and run by
``drain`` at once; unique locks are not taken (every push is accepted).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from rfetch.client import DEFAULT, Client
from rfetch.config import Config
from rfetch.errors import UnknownJob
from rfetch.job import Job
from rfetch.middleware import run_coroutine, run_server_chain, run_server_chain_async
from rfetch.payload import Payload, Routing
from rfetch.push_buffer import BufferedJob
from rfetch.sink import AsyncSend, Send


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


def _read(job: BufferedJob) -> Payload:
    """A pushed job as a worker reads it: parsed from its JSON text, ``at`` put back."""
    payload: Payload = json.loads(job.text)
    if job.at is not None:
        payload["at"] = job.at
    return payload


class JobRunner:
    """Runs one payload in the calling thread, as a worker's processor would: a fresh
    instance with its ``jid``, through ``config.server_middleware``, ``perform(*args)``.

    An async job (``async def perform``) goes through the async form of the chain
    (:func:`rfetch.middleware.run_server_chain_async`): :meth:`run` runs it to its end on a
    fresh event loop (:func:`rfetch.middleware.run_coroutine`), :meth:`arun` awaits it in
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


class FakeQueues:
    """Sidekiq::Testing.fake!'s queues: every pushed job, in memory, in push order.

    It is a sink (:class:`rfetch.sink.Sink`): it keeps what a Client writes and never
    calls Redis. Thread-safe.

    Args:
        config: the server middleware that :meth:`drain` runs jobs through.
    """

    def __init__(self, config: Config | None = None) -> None:
        self.runner = JobRunner(config if config is not None else Config())
        self._lock = threading.Lock()
        self._jobs: list[Payload] = []

    def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool]:
        """Keep ``jobs`` (the Client calls this; ``send`` is not used)."""
        payloads = [_read(job) for job in jobs]
        with self._lock:
            self._jobs.extend(payloads)
        return [True] * len(payloads)

    def jobs(
        self, job_class: type[Job] | None = None, *, queue: str | None = None
    ) -> list[Payload]:
        """The waiting jobs (payload dicts, ``at`` set on scheduled ones), oldest first.

        Args:
            job_class: only this class's jobs (matched by its registered name).
            queue: only this queue's jobs.
        """
        with self._lock:
            return [dict(p) for p in self._jobs if _selected(p, job_class, queue)]

    def clear(self, job_class: type[Job] | None = None, *, queue: str | None = None) -> int:
        """Forget waiting jobs (all, or one class's or queue's); how many were removed."""
        with self._lock:
            kept = [p for p in self._jobs if not _selected(p, job_class, queue)]
            removed = len(self._jobs) - len(kept)
            self._jobs = kept
            return removed

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def perform_one(self, job_class: type[Job] | None = None) -> Payload:
        """Take the oldest waiting job (of ``job_class``) and run it; its payload.

        Raises:
            LookupError: no such job is waiting.
            Exception: whatever the job raised (it is not put back).
        """
        with self._lock:
            batch = self._take(job_class)
        if batch is None:
            raise LookupError(f"no {_describe(job_class)} job is waiting")
        self._run(batch)
        return batch[0]

    def drain(self, *job_classes: type[Job]) -> int:
        """Run waiting jobs (of ``job_classes``, or all) until none is left, jobs they push
        included; how many executions ran. A coalesced key's waiting jobs run as one
        execution, as on a worker.

        Raises:
            Exception: the first exception a job raised; that job is gone, the others
                still wait (Sidekiq::Testing's drain behaves the same).
        """
        ran = 0
        while True:
            with self._lock:
                batch = self._take(*job_classes)
            if batch is None:
                return ran
            self._run(batch)
            ran += 1

    async def adrain(self, *job_classes: type[Job]) -> int:
        """:meth:`drain` for a test running in an event loop: async jobs are awaited in it."""
        ran = 0
        while True:
            with self._lock:
                batch = self._take(*job_classes)
            if batch is None:
                return ran
            holder, args = self._execution(batch)
            await self.runner.arun(holder, args)
            ran += 1

    def _take(self, *job_classes: type[Job] | None) -> list[Payload] | None:
        """Remove and return the oldest selected job with, when it coalesces, the other
        waiting jobs of its key and class; None when none is selected. Holds the lock."""
        names = {c.job_name() for c in job_classes if c is not None}
        for index, payload in enumerate(self._jobs):
            if names and payload["class"] not in names:
                continue
            del self._jobs[index]
            key = payload.get("ordering_key")
            if not payload.get("coalesce") or key is None:
                return [payload]
            same = [
                p for p in self._jobs
                if p.get("ordering_key") == key and p["class"] == payload["class"]
                and p["queue"] == payload["queue"] and p.get("coalesce")
            ]
            self._jobs = [p for p in self._jobs if not any(p is s for s in same)]
            return [payload, *same]
        return None

    def _run(self, batch: list[Payload]) -> None:
        self.runner.run(*self._execution(batch))

    @staticmethod
    def _execution(batch: list[Payload]) -> tuple[Payload, list[Any] | None]:
        """The payload to run and its arguments (None: its own; a coalesced key's batch:
        the argument lists in score order, or the newest one's arguments for "last")."""
        holder = batch[0]
        if len(batch) == 1 and not holder.get("coalesce"):
            return holder, None
        ordered = sorted(batch, key=lambda p: Routing.of(p).score)
        if holder.get("coalesce") == "last":
            return holder, ordered[-1]["args"]
        return holder, [[p["args"] for p in ordered]]


class InlineRunner:
    """Sidekiq::Testing.inline!: a sink that runs every pushed job at once, in the pushing
    thread, through the server middleware; a job's exception is raised by the push.

    Args:
        config: the server middleware to run jobs through.

    Attributes:
        performed: the payloads run so far, in order.
    """

    def __init__(self, config: Config | None = None) -> None:
        self.runner = JobRunner(config if config is not None else Config())
        self.performed: list[Payload] = []

    def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool]:
        """Run ``jobs`` now (the Client calls this; ``send`` is not used)."""
        for job in jobs:
            payload = _read(job)
            self.performed.append(payload)
            self.runner.run(payload)
        return [True] * len(jobs)

    async def awrite(
        self, jobs: Sequence[BufferedJob], send: Send, asend: AsyncSend
    ) -> list[bool]:
        """The same for ``aperform_async``: async jobs are awaited in the caller's loop."""
        for job in jobs:
            payload = _read(job)
            self.performed.append(payload)
            await self.runner.arun(payload)
        return [True] * len(jobs)


def _selected(payload: Payload, job_class: type[Job] | None, queue: str | None) -> bool:
    if job_class is not None and payload["class"] != job_class.job_name():
        return False
    return queue is None or payload["queue"] == queue


def _describe(job_class: type[Job] | None) -> str:
    return job_class.job_name() if job_class is not None else "such"


def _test_config(config: Config | None) -> Config:
    """The given Config, else the default client's, else ``Config.from_env()``; without a
    push spool (a test client must not deliver a spool left by a real process)."""
    if config is None:
        current = DEFAULT.peek()
        config = current.config if current is not None else Config.from_env()
    return config.replace(push_spool=None) if config.push_spool else config


@contextmanager
def fake(config: Config | None = None) -> Iterator[FakeQueues]:
    """Fake mode for the block: pushes through the default client go to a
    :class:`FakeQueues` (yielded), not to Redis.

    Args:
        config: client and server middleware, payload limit (default: the current default
            client's Config, else ``Config.from_env()``).
    """
    config = _test_config(config)
    queues = FakeQueues(config)
    with _default_client(Client(config, sink=queues)):
        yield queues


@contextmanager
def inline(config: Config | None = None) -> Iterator[InlineRunner]:
    """Inline mode for the block: every push through the default client runs the job at
    once (the :class:`InlineRunner` is yielded). ``config`` as for :func:`fake`."""
    config = _test_config(config)
    runner = InlineRunner(config)
    with _default_client(Client(config, sink=runner)):
        yield runner


@contextmanager
def _default_client(client: Client) -> Iterator[None]:
    previous = DEFAULT.swap(client)
    try:
        yield
    finally:
        DEFAULT.swap(previous)


def current() -> FakeQueues:
    """The FakeQueues of the innermost :func:`fake` block.

    Raises:
        RuntimeError: not inside ``fake()`` (or the ``rfetch_fake`` fixture).
    """
    client = DEFAULT.peek()
    sink = client.sink if client is not None else None
    if not isinstance(sink, FakeQueues):
        raise RuntimeError(
            "not in rfetch's fake mode: use `with rfetch.testing.fake():` or the "
            "rfetch_fake fixture"
        )
    return sink


def jobs(job_class: type[Job] | None = None, *, queue: str | None = None) -> list[Payload]:
    """The waiting jobs of the current fake mode (see :meth:`FakeQueues.jobs`)."""
    return current().jobs(job_class, queue=queue)


def drain(*job_classes: type[Job]) -> int:
    """Run the current fake mode's jobs (see :meth:`FakeQueues.drain`)."""
    return current().drain(*job_classes)


def clear(job_class: type[Job] | None = None, *, queue: str | None = None) -> int:
    """Forget the current fake mode's waiting jobs (see :meth:`FakeQueues.clear`)."""
    return current().clear(job_class, queue=queue)
