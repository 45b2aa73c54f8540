"""huey's benchmark jobs (the three kinds of ``base.py``) on a RedisHuey.

huey binds its instance at import, so this module reads REDIS_URL and the queue name
(the first of BENCH_QUEUES: one huey instance serves one queue) from the environment.
"""

from __future__ import annotations

import os
import time

import redis
from huey import RedisHuey

from benchmarks.peers.base import DONE, STARTED, queues_from_env

huey = RedisHuey(queues_from_env()[0], url=os.environ["REDIS_URL"])

_redis = redis.Redis.from_url(os.environ["REDIS_URL"])


@huey.task()
def noop(n: int) -> None:
    _redis.incr(DONE)


@huey.task()
def sleepio(n: int) -> None:
    time.sleep(0.001)
    _redis.incr(DONE)


@huey.task()
def stamp(n: int) -> None:
    _redis.rpush(STARTED, repr(time.time()))
