"""Periodic jobs for the worker-process tests (``-r periodic_jobs``).

``RFETCH_TEST_PERIODIC`` picks what ``configure_worker`` registers:

* ``every-second`` (default): ``PeriodicTick`` every second on queue ``periodic``;
* ``hundred``: 100 schedules of ``PeriodicTick`` that fire once a year, on January 1st
  (the idle-cost benchmark: none fires while it measures);
* ``ruby-only``: every second, ``RubyOnlyWorker`` (``external=True``: no job of that name
  here, only a Ruby process runs it) to queue ``ruby``;
* ``bad-cron``, ``bad-tz``, ``unknown-job``, ``bad-args``: one faulty schedule.

Evidence: a server middleware appends ``tick <schedule> <tick> <jid> <pid> <time>`` to the
file named by ``RFETCH_TEST_RECORD`` after each periodic job ran (one O_APPEND write per
line, so lines of several processes never interleave).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from typing import Any

import rfetch


def record(line: str) -> None:
    path = os.environ.get("RFETCH_TEST_RECORD")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line} {os.getpid()} {time.time():.6f}\n".encode())
    finally:
        os.close(fd)


class PeriodicTick(rfetch.Job):
    queue = "periodic"

    def perform(self, *args: Any) -> None:
        pass


def evidence(
    job: rfetch.Job, payload: dict[str, Any], queue: str, call_next: Callable[[], None]
) -> None:
    call_next()
    if "periodic" in payload:
        record(f"tick {payload['periodic']} {payload['tick']} {payload['jid']}")


def configure_worker(config: rfetch.Config) -> None:
    config.server_middleware.append(evidence)
    kind = os.environ.get("RFETCH_TEST_PERIODIC", "every-second")
    if kind == "every-second":
        config.periodic.register("* * * * * *", PeriodicTick, name="every-second")
    elif kind == "hundred":
        for i in range(100):
            config.periodic.register(
                f"{i % 60} {i % 24} 1 1 *", PeriodicTick, name=f"yearly-{i}", args=[i]
            )
    elif kind == "ruby-only":
        config.periodic.register(
            "* * * * * *", "RubyOnlyWorker", name="ruby-only", queue="ruby", external=True,
            args=["nightly"],
        )
    elif kind == "bad-cron":
        config.periodic.register("61 * * * *", PeriodicTick, name="broken-cron")
    elif kind == "bad-tz":
        config.periodic.register("0 2 * * *", PeriodicTick, name="broken-tz", tz="Europe/Berln")
    elif kind == "unknown-job":
        config.periodic.register("0 2 * * *", "NoSuchJob", name="ghost")
    elif kind == "bad-args":
        config.periodic.register(
            "0 2 * * *", PeriodicTick, name="broken-args", args=[dt.date(2026, 1, 1)]
        )
