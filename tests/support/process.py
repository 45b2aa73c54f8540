"""A subprocess of the tests whose output goes to a log file: the base of the worker-process
and web-process harnesses (``tests/support/workers.py``, ``tests/support/web.py``)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class LoggedProcess:
    """``command`` started at once, stdout and stderr to ``<log_dir>/<name>-<ns>.log``.

    Only this process is ever signalled, by its own PID.
    """

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        env: Mapping[str, str],
        log_dir: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.log_path = (log_dir or Path("/tmp")) / f"{name}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in wait/kill/stop
        self.proc = subprocess.Popen(
            list(command),
            env=dict(env),
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
