"""rfetch's benchmark jobs: the same three kinds as every peer's (``benchmarks/peers/base.py``),
so completion and start times are recorded the same way for every framework."""

from __future__ import annotations

import functools
import os
import time

import redis

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


class Cpu(rfetch.Job):
    """About 5 ms of pure-Python CPU work (by this thread's CPU clock, so the same work on
    any machine and under any load), then INCR bench:done: holds the GIL throughout."""

    def perform(self, n: int) -> None:
        start = time.thread_time()
        while time.thread_time() - start < 0.005:
            sum(range(200))
        _redis().incr("bench:done")
