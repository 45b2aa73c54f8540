"""rfetch's benchmark jobs: the same three kinds as every peer's (``benchmarks/peers/base.py``),
so completion and start times are recorded the same way for every framework."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import time

import redis
import redis.asyncio as aioredis

import rfetch


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(os.environ["REDIS_URL"])


class Noop(rfetch.Job):
    """INCR bench:done."""

    def perform(self, n: int) -> None:
        _redis().incr("bench:done")


class Nothing(rfetch.Job):
    """Does nothing: the Redis-cost benchmark (``benchmarks.redis_cost``) counts
    ``stat:processed``, so every Redis command it sees is rfetch's own."""

    def perform(self, n: int) -> None:
        return None


class SleepIO(rfetch.Job):
    """Sleeps 1 ms (simulated I/O), then INCR bench:done."""

    def perform(self, n: int) -> None:
        time.sleep(0.001)
        _redis().incr("bench:done")


class Stamp(rfetch.Job):
    """RPUSH bench:started with the time the job started (float epoch seconds)."""

    def perform(self, n: int) -> None:
        _redis().rpush("bench:started", repr(time.time()))


class Latency(rfetch.Job):
    """RPUSH bench:lat "<pushed_at> <started_at>" (float epoch seconds): the idle-latency
    probe (``python -m benchmarks.queue_latency``, the peer benchmark's ``Lat``)."""

    def perform(self, pushed_at: float) -> None:
        _redis().rpush("bench:lat", f"{pushed_at} {time.time()}")


@functools.cache
def _async_redis() -> aioredis.Redis:
    """One asyncio client per worker process (its one event loop thread uses it), with a
    connection for each job that may run at once (redis-py's default pool has 100)."""
    return aioredis.Redis.from_url(os.environ["REDIS_URL"], max_connections=10_000)


class AsyncWait(rfetch.Job):
    """``await asyncio.sleep(0.1)`` (simulated network I/O), then INCR bench:done; an async
    job, run on the worker's event loop (``python -m benchmarks.async_sleep``)."""

    async def perform(self, n: int) -> None:
        await asyncio.sleep(0.1)
        await _async_redis().incr("bench:done")


class ThreadWait(rfetch.Job):
    """The same wait in a thread: ``time.sleep(0.1)``, then INCR bench:done."""

    def perform(self, n: int) -> None:
        time.sleep(0.1)
        _redis().incr("bench:done")


class Cpu(rfetch.Job):
    """About 5 ms of pure-Python CPU work (by this thread's CPU clock, so the same work on
    any machine and under any load), then INCR bench:done: holds the GIL throughout."""

    def perform(self, n: int) -> None:
        start = time.thread_time()
        while time.thread_time() - start < 0.005:
            sum(range(200))
        _redis().incr("bench:done")


class SocketIO(rfetch.Job):
    """I/O-bound: sleeps 2 ms and makes one Redis round trip (GET) before INCR bench:done;
    the GIL is free for both waits. Used by ``benchmarks.affinity``."""

    def perform(self, n: int) -> None:
        time.sleep(0.002)
        _redis().get("bench:none")
        _redis().incr("bench:done")


@functools.cache
def _buffer() -> bytes:
    return bytes(int(os.environ.get("BENCH_HASH_MB", "64")) * 1024 * 1024)


class HashBuffer(rfetch.Job):
    """CPU work that releases the GIL: SHA-256 of a ``BENCH_HASH_MB`` (64) MB buffer
    (hashlib drops the GIL for inputs over 2 KiB), then INCR bench:done. Used by
    ``benchmarks.affinity``."""

    def perform(self, n: int) -> None:
        hashlib.sha256(_buffer()).digest()
        _redis().incr("bench:done")


class ChildBurn(rfetch.Job):
    """CPU work done in a subprocess: a child Python spins ``BENCH_BURN_S`` (0.3) seconds of
    its own CPU time, then INCR bench:done. Used by ``benchmarks.affinity_spread`` (adaptive
    affinity counts the CPU of a worker's children)."""

    def perform(self, n: int) -> None:
        import subprocess
        import sys

        seconds = float(os.environ.get("BENCH_BURN_S", "0.3"))
        subprocess.run(
            [sys.executable, "-c", "import time\nend = time.process_time() + "
             f"{seconds}\nwhile time.process_time() < end: pass"],
            check=True,
        )
        _redis().incr("bench:done")
