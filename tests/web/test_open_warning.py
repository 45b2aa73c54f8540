"""``rfetch web`` bound beyond localhost without auth says so: in its log at start and in a
banner on every page."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from rfetch.web import WebApp
from rfetch.web.server import is_loopback
from tests.support.redis_server import RedisServer, free_port
from tests.web.conftest import text

WARNING = "without authentication"
BANNER = 'class="exposed"'


def run_web(redis_url: str, bind: str, log: Path, env: dict[str, str] | None = None
            ) -> tuple[str, str]:
    """Start ``rfetch web --bind <bind>``, read its dashboard, stop it; (log, page)."""
    port = int(bind.rpartition(":")[2])
    full_env = {**os.environ, "REDIS_URL": redis_url, **(env or {})}
    for name in ("RFETCH_WEB_USER", "RFETCH_WEB_PASSWORD"):
        if name not in (env or {}):
            full_env.pop(name, None)
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "rfetch.cli", "web", "--bind", bind],
                                env=full_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while "rfetch web" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.05)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/queues")
        if env and "RFETCH_WEB_USER" in env:
            import base64

            secret = f"{env['RFETCH_WEB_USER']}:{env['RFETCH_WEB_PASSWORD']}".encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(secret).decode())
        with urllib.request.urlopen(request, timeout=5) as answer:
            page = answer.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    return log.read_text(errors="replace"), page


def test_open_to_the_network_without_auth_warns(redis_server: RedisServer,
                                                tmp_path: Path) -> None:
    started, page = run_web(redis_server.url, f"0.0.0.0:{free_port()}", tmp_path / "w.log")
    assert WARNING in started and "RFETCH_WEB_USER" in started
    assert BANNER in page and "asks for no password" in page


def test_localhost_or_auth_does_not_warn(redis_server: RedisServer, tmp_path: Path) -> None:
    started, page = run_web(redis_server.url, f"127.0.0.1:{free_port()}", tmp_path / "a.log")
    assert WARNING not in started and BANNER not in page
    started, page = run_web(redis_server.url, f"0.0.0.0:{free_port()}", tmp_path / "b.log",
                            env={"RFETCH_WEB_USER": "ops", "RFETCH_WEB_PASSWORD": "s3cret"})
    assert WARNING not in started and BANNER not in page


@pytest.mark.parametrize(("host", "local"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("example.com", False),
])
def test_is_loopback(host: str, local: bool) -> None:
    assert is_loopback(host) is local


def test_banner_shows_on_every_page_when_asked(make_app: Callable[..., WebApp]) -> None:
    from werkzeug.test import Client

    client = Client(make_app(open_warning=True))
    for path in ("/", "/queues", "/retries", "/busy", "/keys", "/explain"):
        assert BANNER in text(client.get(path)), path
    assert BANNER not in text(Client(make_app()).get("/"))
