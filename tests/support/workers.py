"""The worker-process harness: real ``rfetch worker`` subprocesses for the integration and
chaos tests (jobs from ``tests/jobs``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import redis

from tests.support.process import RfetchProcess
from tests.support.wait import wait_for

JOBS_DIR = Path(__file__).resolve().parent.parent / "jobs"

NO_SPEEDUPS = Path(__file__).resolve().parent / "nospeedups"
"""First on PYTHONPATH, hides hiredis and orjson (rfetch's pure-Python fallback)."""

FAST_ENV: dict[str, str] = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.5",
    "RFETCH_HEARTBEAT_TTL": "2",
    "RFETCH_ORPHAN_CHECK_INTERVAL": "1",
    "RFETCH_POLL_INTERVAL_AVERAGE": "0.5",
    "RFETCH_POLL_INITIAL_WAIT": "0",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
}
"""Small intervals for subprocess workers: a kill -9 is recovered within about
TTL (2 s) + check interval (0.5-1.5 s) + second look (1.5 s)."""


class WorkerProcess(RfetchProcess):
    """One ``rfetch worker`` subprocess (``args`` after ``worker``), run from ``tests/jobs``
    so that ``-r <module>`` finds the test jobs; its log goes to a file. A PYTHONPATH this
    process has (scripts/test-versions' run without hiredis and orjson) comes after the jobs'
    directory."""

    def __init__(
        self,
        redis_url: str,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        inherited = os.environ.get("PYTHONPATH")
        path = os.pathsep.join([str(JOBS_DIR), inherited]) if inherited else str(JOBS_DIR)
        jobs_env = {"PYTHONPATH": path, **(env or {})}
        super().__init__("worker", args, redis_url, jobs_env, log_dir, cwd=JOBS_DIR)

    def wait_started(self, timeout: float = 60.0) -> None:
        """Wait until the worker handles signals (its "starting" line, written after its
        signal handlers are installed) or has exited. A TERM sent during its imports, which
        take seconds on a loaded machine, would kill it with Python's default action.

        Raises:
            AssertionError: neither within ``timeout`` seconds.
        """
        wait_for(lambda: " starting: identity=" in self.log() or self.proc.poll() is not None,
                 timeout, lambda: f"worker {self.pid}'s start line:\n{self.log()[-2000:]}")

    def identity(self, client: redis.Redis, timeout: float = 60.0) -> str:
        """Wait for this process's heartbeat and return its identity.

        Raises:
            RuntimeError: the worker exited first.
            AssertionError: no heartbeat within ``timeout`` seconds (generous: a worker's
                start-up imports are slow on a loaded machine).
        """
        found: list[str] = []

        def beating() -> bool:
            for member in client.smembers("processes"):
                ident = member.decode()
                if ident.split(":")[-2] == str(self.pid):
                    found.append(ident)
                    return True
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log()}")
            return False

        wait_for(beating, timeout, lambda: f"a heartbeat from worker {self.pid}:\n{self.log()}")
        return found[0]
