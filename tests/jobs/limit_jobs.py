"""Jobs for the time-limit, cancellation and swarm tests; workers load them with
``-r limit_jobs``. Evidence goes outside Redis, through :func:`testjobs.record`
(``RFETCH_TEST_RECORD``); death handlers record ``died <jid> <pid> <time> <error class>``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from testjobs import record

import rfetch

_LEAKED: list[bytes] = []


class Hang(rfetch.Job):
    """Sleeps an hour: only the hard time limit (or a KILL) ends it."""

    timeout = 2.0
    retry = 3

    def perform(self, *args: Any) -> None:
        record("start", self.jid)
        time.sleep(3600)
        record("done", self.jid)


class Polite(rfetch.Job):
    """Works in small steps and stops at the first ``check_cancelled`` that says so."""

    retry = 3

    def perform(self, seconds: float = 3600.0) -> None:
        record("start", self.jid)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                self.check_cancelled()
            except (rfetch.JobTimeout, rfetch.JobCancelled) as exc:
                record("stopped", self.jid, type(exc).__name__)
                raise
            time.sleep(0.02)
        record("done", self.jid)


class Work(rfetch.Job):
    """Sleeps ``seconds`` (default 0.5), recording start and finish."""

    def perform(self, seconds: float = 0.5, *rest: Any) -> None:
        record("start", self.jid)
        time.sleep(seconds)
        record("done", self.jid)


class Leak(rfetch.Job):
    """Keeps 50 MB (touched, so resident) for the life of its process, then works 0.3 s
    (so the supervisor's once-a-second memory check sees it between jobs)."""

    def perform(self, *args: Any) -> None:
        record("start", self.jid)
        _LEAKED.append(b"x" * (50 * 1024 * 1024))
        time.sleep(0.3)
        record("done", self.jid)


class Hog(rfetch.Job):
    """Holds ``mb`` MB (touched, so resident) for ``seconds``, counting its starts in Redis
    (``INCR hog-starts:<jid>``) and recording start and finish; frees it on return."""

    retry = 0

    def perform(self, mb: int = 200, seconds: float = 8.0) -> None:
        record("start", self.jid)
        redis.Redis.from_url(os.environ["REDIS_URL"]).incr(f"hog-starts:{self.jid}")
        held = bytearray(mb * 1024 * 1024)
        for i in range(0, len(held), 4096):
            held[i] = 1
        time.sleep(seconds)
        del held
        record("done", self.jid)


def configure_worker(config: rfetch.Config) -> None:
    """Record every death, with the exception the death handlers see."""

    def died(job: dict[str, Any], exc: BaseException) -> None:
        record("died", job["jid"], f"{type(exc).__module__}.{type(exc).__name__}")

    config.death_handlers.append(died)
