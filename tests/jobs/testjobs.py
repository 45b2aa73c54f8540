"""Jobs used by the integration tests; workers load them with ``-r testjobs``.

Evidence of execution is written outside Redis: one line per event appended to the file
named by ``RFETCH_TEST_RECORD`` (``<event> <jid> <pid> <time>``), with O_APPEND so lines
from several processes never interleave.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from evidence import append_line

import rfetch


def record(event: str, jid: str, extra: str = "") -> None:
    path = os.environ.get("RFETCH_TEST_RECORD")
    if not path:
        return
    append_line(path, f"{event} {jid} {os.getpid()} {time.time():.6f} {extra}\n")


class Noop(rfetch.Job):
    def perform(self, *args: Any) -> None:
        record("done", self.jid)


class Sleep(rfetch.Job):
    """Sleeps ``seconds``, recording start and finish."""

    def perform(self, seconds: float, *rest: Any) -> None:
        record("start", self.jid)
        time.sleep(seconds)
        record("done", self.jid)


class Counter(rfetch.Job):
    """INCR a key, as the benchmark's no-op job does."""

    def perform(self, key: str) -> None:
        redis.Redis.from_url(os.environ["REDIS_URL"]).incr(key)


class Hash(rfetch.Job):
    """SHA-256 of ``mb`` megabytes, ``rounds`` times: CPU work that releases the GIL
    (hashlib does on large inputs), so several threads run it on several CPUs at once."""

    def perform(self, mb: int, rounds: int = 1) -> None:
        import hashlib

        data = bytes(mb * 1024 * 1024)
        for _ in range(rounds):
            hashlib.sha256(data).hexdigest()


class Burn(rfetch.Job):
    """Runs a subprocess that spins ``seconds`` of CPU: work done outside this process."""

    def perform(self, seconds: float) -> None:
        import subprocess
        import sys

        subprocess.run(
            [sys.executable, "-c", f"import time\nend = time.time() + {seconds}\n"
             "while time.time() < end: pass"],
            check=True,
        )


class AlwaysFails(rfetch.Job):
    retry = 2

    def perform(self, *args: Any) -> None:
        record("fail", self.jid)
        raise RuntimeError("always fails")


class Hard(rfetch.Job):
    """Named as a Ruby client would push it."""

    name = "HardJob"

    def perform(self, *args: Any) -> None:
        record("done", self.jid, repr(args))


class Crash(rfetch.Job):
    """Kills its own process (a poison pill)."""

    def perform(self) -> None:
        record("start", self.jid)
        os._exit(1)


class Gated(rfetch.Job):
    """Records its start, then waits until the file ``path`` exists (a thread held busy for
    as long as the test needs, with no timing)."""

    def perform(self, path: str) -> None:
        record("start", self.jid)
        while not os.path.exists(path):
            time.sleep(0.05)
        record("done", self.jid)
