"""Dramatiq's benchmark jobs (the three kinds of ``base.py``) on a RedisBroker.

Dramatiq binds its broker at import, so this module reads REDIS_URL and the queues to
declare (BENCH_QUEUES) from the environment; the worker and the client both import it.
"""

from __future__ import annotations

import os
import time

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

from benchmarks.peers.base import DONE, STARTED, queues_from_env

broker = RedisBroker(url=os.environ["REDIS_URL"])
dramatiq.set_broker(broker)
for _queue in queues_from_env():
    broker.declare_queue(_queue)

_redis = redis.Redis.from_url(os.environ["REDIS_URL"])


@dramatiq.actor(queue_name="default")
def noop(n: int) -> None:
    _redis.incr(DONE)


@dramatiq.actor(queue_name="default")
def sleepio(n: int) -> None:
    time.sleep(0.001)
    _redis.incr(DONE)


@dramatiq.actor(queue_name="default")
def stamp(n: int) -> None:
    _redis.rpush(STARTED, repr(time.time()))
