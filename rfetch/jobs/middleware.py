"""Client and server middleware chains (Sidekiq's middleware, in Python form).

Sidekiq's client middleware is ``call(job_class, job, queue, redis_pool) { yield }`` and its
server middleware ``call(job_instance, job, queue) { yield }``. Python has no blocks, so the
rest of the chain is passed as ``call_next``:

    def audit(job_class, job, queue, redis, call_next):
        job["tags"] = job.get("tags", []) + ["audited"]
        return call_next()          # return None instead to stop the push

    def timing(job, payload, queue, call_next):
        started = time.monotonic()
        try:
            call_next()
        finally:
            log(payload["jid"], time.monotonic() - started)

Async jobs (``async def perform``) run their server chain on the worker's event loop
(:func:`run_server_chain_async`). A middleware serves both kinds of job in the form that
fits each: an object may define ``acall(job, payload, queue, call_next)`` returning an
awaitable, used for async jobs (``await call_next()``); an ``async def`` middleware works
for both (for a sync job it runs in a fresh event loop in the job's thread); a plain sync
middleware around an async job runs in a thread of the loop's executor, its ``call_next``
waiting for the rest of the chain on the loop, so it holds a thread while the job runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from redis import Redis

    from rfetch.jobs.job import Job

Payload = dict[str, Any]
T = TypeVar("T")


class ClientMiddleware(Protocol):
    """Runs around each push; return ``call_next()`` to go on, or None to drop the push."""

    def __call__(
        self,
        job_class: str,
        job: Payload,
        queue: str,
        redis: Redis,
        call_next: Callable[[], Payload | None],
    ) -> Payload | None: ...


class ServerMiddleware(Protocol):
    """Runs around each job execution; must call ``call_next()`` for the job to run.

    An ``async def`` middleware has the same parameters and awaits ``call_next()``."""

    def __call__(
        self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]
    ) -> None: ...


AsyncNext = Callable[[], Awaitable[None]]
"""The rest of an async job's server chain."""


def run_client_chain(
    chain: Sequence[ClientMiddleware], job_class: str, job: Payload, queue: str, redis: Redis
) -> Payload | None:
    """Run ``job`` through the client chain; the payload to push, or None if stopped."""

    def step(index: int) -> Payload | None:
        if index == len(chain):
            return job
        return chain[index](job_class, job, queue, redis, lambda: step(index + 1))

    return step(0)


def run_server_chain(
    chain: Sequence[ServerMiddleware],
    job: Job,
    payload: Payload,
    queue: str,
    perform: Callable[[], object],
) -> None:
    """Run ``perform`` inside the server chain (its return value is not used)."""

    def step(index: int) -> None:
        if index == len(chain):
            perform()
            return
        middleware: Any = chain[index]
        if inspect.iscoroutinefunction(middleware):

            async def rest() -> None:
                step(index + 1)

            run_coroutine(lambda: middleware(job, payload, queue, rest))
        else:
            middleware(job, payload, queue, lambda: step(index + 1))

    step(0)


def run_coroutine(factory: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``factory()`` makes to its end, from sync code: with
    ``asyncio.run``, or, when this thread already runs an event loop (a test using
    Playwright's sync API, a notebook), on a fresh loop in a thread of its own.

    Raises:
        Exception: whatever the coroutine raises.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(factory))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rfetch-run") as pool:
        return pool.submit(asyncio.run, _awaited(factory)).result()


async def _awaited(factory: Callable[[], Awaitable[T]]) -> T:
    return await factory()


async def run_server_chain_async(
    chain: Sequence[ServerMiddleware],
    job: Job,
    payload: Payload,
    queue: str,
    perform: Callable[[], Awaitable[object]],
) -> None:
    """Await ``perform()`` inside the server chain, on the running event loop (async jobs).

    Each middleware runs in its async form when it has one (``acall``, or an ``async def``
    middleware); a sync middleware runs in the loop's default executor around the rest of
    the chain (see the module docstring).
    """
    loop = asyncio.get_running_loop()

    async def step(index: int) -> None:
        if index == len(chain):
            await perform()
            return
        middleware: Any = chain[index]
        acall = getattr(middleware, "acall", None)
        if acall is not None:
            await acall(job, payload, queue, lambda: step(index + 1))
        elif inspect.iscoroutinefunction(middleware):
            await middleware(job, payload, queue, lambda: step(index + 1))
        else:

            def call_next() -> None:
                asyncio.run_coroutine_threadsafe(step(index + 1), loop).result()

            await loop.run_in_executor(None, middleware, job, payload, queue, call_next)

    await step(0)
