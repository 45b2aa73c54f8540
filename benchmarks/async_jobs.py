"""The asyncio benchmark's job alone (``python -m benchmarks.async_sleep``): a worker that
loads only this module has async classes only, as the peer benchmark's ``rfetch_async_jobs``
worker has, so the fetcher hands every job to the event loop without reading its class."""

from __future__ import annotations

import asyncio
import functools
import os

import redis.asyncio as aioredis

import rfetch


@functools.cache
def _async_redis() -> aioredis.Redis:
    """One asyncio client for the worker's one event loop, a connection for each job that
    may run at once."""
    return aioredis.Redis.from_url(os.environ["REDIS_URL"], max_connections=10_000)


class OnlyAsyncWait(rfetch.Job):
    """``await asyncio.sleep(0.1)``, then INCR bench:done (``bench_jobs.AsyncWait``'s body)."""

    async def perform(self, n: int) -> None:
        await asyncio.sleep(0.1)
        await _async_redis().incr("bench:done")
