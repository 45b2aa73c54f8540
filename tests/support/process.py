"""An ``rfetch`` CLI subprocess whose output goes to a log file: the base of the
worker-process and web-process harnesses (``tests/support/workers.py``,
``tests/support/web.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class RfetchProcess:
    """``python -m rfetch.cli <command> <args>`` started at once against ``redis_url``
    (``REDIS_URL``), stdout and stderr to ``<log_dir>/<command>-<ns>.log``.

    The environment is this process's, without the variables in ``unset``, with ``env`` on
    top. Only this process is ever signalled, by its own PID.
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str],
        redis_url: str,
        env: Mapping[str, str] | None = None,
        log_dir: Path | None = None,
        cwd: Path | None = None,
        unset: Sequence[str] = (),
    ) -> None:
        full_env = {k: v for k, v in os.environ.items() if k not in unset}
        full_env.update({"REDIS_URL": redis_url, **(env or {})})
        self.log_path = (log_dir or Path("/tmp")) / f"{command}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in wait/kill/stop
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", command, *args],
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=None if cwd is None else str(cwd),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` unless the process has exited."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        self.signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()

    def wait(self, timeout: float) -> int:
        """Wait ``timeout`` seconds at most for the exit; the exit code.

        Raises:
            subprocess.TimeoutExpired: the process still runs.
        """
        code = self.proc.wait(timeout)
        self._log.close()
        return code

    def stop(self, timeout: float = 10.0) -> int:
        """TERM, then KILL if it does not exit within ``timeout`` seconds; the exit code."""
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
        self._log.close()
        return self.proc.returncode
