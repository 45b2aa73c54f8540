"""Samples what one worker process holds while it drains a queue: the length of its
private list and the jobs it gave back to the queue (its log's "pushed back N job(s) not
started" lines). For the fetch-room tests and their measurement script."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.store.keys import Keys
from tests.support.workers import WorkerProcess

GIVEN_BACK = re.compile(r"pushed back (\d+) job\(s\) not started \(waiting behind")


@dataclass(frozen=True)
class Hoard:
    """What a drain showed: ``max_held`` the longest private list sampled, ``given_back``
    the jobs pushed back not started, ``samples`` how many lengths were read, ``ran`` how
    many jobs left the queue."""

    max_held: int
    given_back: int
    samples: int
    ran: int


def given_back(log: str) -> int:
    """Jobs the worker's log says it gave back for want of a thread (not those pushed
    back at its stop)."""
    return sum(int(match.group(1)) for match in GIVEN_BACK.finditer(log))


def sample_drain(
    url: str,
    client: redis.Redis,
    args: list[str],
    log_dir: Path,
    jobs: int,
    seconds: float,
    job_seconds: float = 0.0,
    env: dict[str, str] | None = None,
) -> Hoard:
    """Push ``jobs`` ``testjobs.Sleep`` jobs of ``job_seconds`` each, start ``rfetch
    worker <args>``, sample its private list for ``seconds`` (or until the queue is
    empty), stop it by TERM. ``env``: the worker's extra environment.

    Raises:
        AssertionError: the worker showed no heartbeat.
    """
    keys = Keys()
    client.flushall()
    pusher = Client(Config(redis_url=url), client)
    for start in range(0, jobs, 1000):
        pusher.push_bulk(
            "testjobs.Sleep", [[job_seconds] for _ in range(min(1000, jobs - start))]
        )
    proc = WorkerProcess(url, args, env or {}, log_dir)
    try:
        private = keys.private(proc.identity(client), "default")
        queue = keys.queue("default")
        longest = samples = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and client.llen(queue):
            longest = max(longest, int(client.llen(private)))  # type: ignore[arg-type]
            samples += 1
            time.sleep(0.002)
        ran = jobs - int(client.llen(queue))  # type: ignore[arg-type]
    finally:
        proc.stop(20)
    return Hoard(longest, given_back(proc.log()), samples, ran)
