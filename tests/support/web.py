"""The web-process harness: a real ``rfetch web`` subprocess for tests."""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from tests.support.process import LoggedProcess
from tests.support.redis_server import free_port
from tests.support.wait import wait_for


class WebProcess(LoggedProcess):
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
        full_env = {**os.environ, "REDIS_URL": redis_url}
        for name in ("RFETCH_WEB_USER", "RFETCH_WEB_PASSWORD", "RFETCH_WEB_READ_ONLY"):
            full_env.pop(name, None)
        full_env.update(env or {})
        command = [sys.executable, "-m", "rfetch.cli", "web", "--bind",
                   f"127.0.0.1:{self.port}", *args]
        if prefix:
            command += ["--prefix", prefix]
        super().__init__("web", command, full_env, log_dir)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until the server answers (any HTTP status).

        Raises:
            RuntimeError: the server exited first.
            AssertionError: no answer within ``timeout`` seconds.
        """

        def answers() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rfetch web exited early:\n{self.log()}")
            try:
                urllib.request.urlopen(self.url + "/static/rfetch.css", timeout=2).close()
            except urllib.error.HTTPError:
                return True
            except OSError:
                return False
            return True

        wait_for(answers, timeout, lambda: f"rfetch web to answer:\n{self.log()}")
