"""Run a real ``rfetch web`` process for tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tests.support.redis_server import free_port


class WebProcess:
    """``rfetch web --bind 127.0.0.1:<free port>``; its output goes to a file."""

    def __init__(
        self,
        redis_url: str,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        prefix: str = "",
    ) -> None:
        self.port = free_port()
        self.prefix = prefix
        self.log_path = (log_dir or Path("/tmp")) / f"web-{time.monotonic_ns()}.log"
        full_env = {**os.environ, "REDIS_URL": redis_url}
        for name in ("RFETCH_WEB_USER", "RFETCH_WEB_PASSWORD", "RFETCH_WEB_READ_ONLY"):
            full_env.pop(name, None)
        full_env.update(env or {})
        command = [sys.executable, "-m", "rfetch.cli", "web", "--bind",
                   f"127.0.0.1:{self.port}", *args]
        if prefix:
            command += ["--prefix", prefix]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop
        self.proc = subprocess.Popen(command, env=full_env, stdout=self._log,
                                     stderr=subprocess.STDOUT)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until the server answers (any HTTP status)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rfetch web exited early:\n{self.log()}")
            try:
                urllib.request.urlopen(self.url + "/static/rfetch.css", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"rfetch web did not answer:\n{self.log()}")

    def stop(self, timeout: float = 10.0) -> int:
        """TERM, then KILL if it does not exit; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self._log.close()
        return self.proc.returncode
