"""Celery's benchmark jobs (the three kinds of ``base.py``) and app, Redis as broker, no
result backend. The app reads REDIS_URL from the environment at import."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

from benchmarks.peers.base import DONE, STARTED

app = Celery("bench", broker=os.environ["REDIS_URL"])
app.conf.update(
    task_ignore_result=True,
    task_default_queue="default",
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)

_redis = redis.Redis.from_url(os.environ["REDIS_URL"])


@app.task(name="noop")
def noop(n: int) -> None:
    _redis.incr(DONE)


@app.task(name="sleepio")
def sleepio(n: int) -> None:
    time.sleep(0.001)
    _redis.incr(DONE)


@app.task(name="stamp")
def stamp(n: int) -> None:
    _redis.rpush(STARTED, repr(time.time()))
