"""arq's benchmark jobs (the three kinds of ``base.py``) and WorkerSettings.

arq reads its settings from a class, so this module takes REDIS_URL, the queue (the first
of BENCH_QUEUES: an arq worker serves one queue) and max_jobs (BENCH_CONCURRENCY) from
the environment. ``poll_delay`` is 10 ms as in the issue's table (arq's default is 0.5 s).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from arq.connections import RedisSettings
from arq.logs import default_log_config

from benchmarks.peers.base import DONE, STARTED, queues_from_env


async def noop(ctx: dict[str, Any], n: int) -> None:
    await ctx["redis"].incr(DONE)


async def sleepio(ctx: dict[str, Any], n: int) -> None:
    await asyncio.sleep(0.001)
    await ctx["redis"].incr(DONE)


async def wait100(ctx: dict[str, Any], n: int) -> None:
    await asyncio.sleep(0.1)
    await ctx["redis"].incr(DONE)


async def stamp(ctx: dict[str, Any], n: int) -> None:
    await ctx["redis"].rpush(STARTED, repr(time.time()))


# ``arq --custom-log-dict benchmarks.peers.arq_jobs.QUIET_LOG``: arq's own logging setup with
# the ``arq`` logger at WARNING, so its per-job INFO lines are off (the quiet setting).
QUIET_LOG = default_log_config(verbose=False)
QUIET_LOG["loggers"]["arq"]["level"] = "WARNING"


class WorkerSettings:
    functions = [noop, sleepio, stamp, wait100]
    redis_settings = RedisSettings.from_dsn(os.environ["REDIS_URL"])
    redis_settings.max_connections = 10_000  # redis-py's default pool has 100
    queue_name = queues_from_env()[0]
    max_jobs = int(os.environ.get("BENCH_CONCURRENCY", "10"))
    poll_delay = 0.01
