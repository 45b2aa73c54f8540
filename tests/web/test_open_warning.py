"""``rfetch web`` bound beyond localhost without auth says so: in its log at start and in a
banner on every page."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from rfetch.web import WebApp
from rfetch.web.server import is_loopback
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.web import WebProcess, text

WARNING = "without authentication"
BANNER = 'class="exposed"'


def run_web(redis_url: str, host: str, log_dir: Path, env: dict[str, str] | None = None
            ) -> tuple[str, str]:
    """Start ``rfetch web --bind <host>:<free port>``, read its queues page, stop it;
    (log, page)."""
    web = WebProcess(redis_url, env=env, log_dir=log_dir, host=host)
    try:
        web.wait_ready()
        wait_for(lambda: "rfetch web" in web.log(), 20, "the start line in the log")
        request = urllib.request.Request(f"{web.url}/queues")
        if env and "RFETCH_WEB_USER" in env:
            import base64

            secret = f"{env['RFETCH_WEB_USER']}:{env['RFETCH_WEB_PASSWORD']}".encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(secret).decode())
        with urllib.request.urlopen(request, timeout=5) as answer:
            page = answer.read().decode()
    finally:
        web.stop()
    return web.log(), page


def test_open_to_the_network_without_auth_warns(redis_server: RedisServer,
                                                tmp_path: Path) -> None:
    started, page = run_web(redis_server.url, "0.0.0.0", tmp_path)
    assert WARNING in started and "RFETCH_WEB_USER" in started
    assert BANNER in page and "asks for no password" in page


def test_localhost_or_auth_does_not_warn(redis_server: RedisServer, tmp_path: Path) -> None:
    started, page = run_web(redis_server.url, "127.0.0.1", tmp_path)
    assert WARNING not in started and BANNER not in page
    started, page = run_web(redis_server.url, "0.0.0.0", tmp_path,
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
