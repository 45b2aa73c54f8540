"""RQ's benchmark jobs (the three kinds of ``base.py``): plain functions that the worker
imports by their dotted path."""

from __future__ import annotations

import functools
import os
import time

import redis

from benchmarks.peers.base import DONE, STARTED


@functools.cache
def _redis() -> redis.Redis:
    # Built at first use, in the (possibly forked) process that runs the job.
    return redis.Redis.from_url(os.environ["REDIS_URL"])


def noop(n: int) -> None:
    _redis().incr(DONE)


def sleepio(n: int) -> None:
    time.sleep(0.001)
    _redis().incr(DONE)


def stamp(n: int) -> None:
    _redis().rpush(STARTED, repr(time.time()))
