"""Run real ``rfetch worker`` processes for integration tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import redis

JOBS_DIR = Path(__file__).resolve().parent.parent / "jobs"


class WorkerProcess:
    """One ``rfetch worker`` subprocess; its log goes to a file."""

    def __init__(
        self,
        redis_url: str,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
    ) -> None:
        self.log_path = (log_dir or Path("/tmp")) / f"worker-{time.monotonic_ns()}.log"
        full_env = {**os.environ, "REDIS_URL": redis_url, "PYTHONPATH": str(JOBS_DIR)}
        full_env.update(env or {})
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in wait/kill
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", *args],
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=str(JOBS_DIR),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, sig: signal.Signals) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._log.close()
        return code

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def identity(self, client: redis.Redis, timeout: float = 15.0) -> str:
        """Wait for this process's heartbeat and return its identity."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for member in client.smembers("processes"):
                ident = member.decode()
                if ident.split(":")[-2] == str(self.pid):
                    return ident
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log()}")
            time.sleep(0.05)
        raise TimeoutError(f"no heartbeat from worker {self.pid}:\n{self.log()}")


def wait_for(condition: Callable[[], bool], timeout: float, what: str, step: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
