"""``rfetch web``: a real waitress server in a subprocess."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from rfetch.cli import main
from tests.support.redis_server import RedisServer
from tests.support.web import WebProcess


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read().decode(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def test_help_describes_every_option() -> None:
    result = CliRunner().invoke(main, ["web", "--help"])
    assert result.exit_code == 0
    for fragment in ("--bind HOST:PORT", "127.0.0.1:7433", "--prefix PATH", "--read-only",
                     "--redis-url", "--namespace", "RFETCH_WEB_USER", "RFETCH_WEB_PASSWORD",
                     "/metrics", "--threads"):
        assert fragment in result.output, fragment
    worker_help = CliRunner().invoke(main, ["worker", "--help"]).output
    assert "--metrics-port PORT" in worker_help


def test_bad_bind_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["web", "--bind", "localhost:http"])
    assert result.exit_code == 2
    assert "expected HOST:PORT" in result.output


def test_serves_pages_actions_and_metrics(redis_server: RedisServer, r: redis.Redis,
                                          tmp_path: Path) -> None:
    r.sadd("queues", "default")
    web = WebProcess(redis_server.url, log_dir=tmp_path)
    try:
        web.wait_ready()
        assert f"on http://127.0.0.1:{web.port}/" in web.log()
        assert "read-write, no auth" in web.log()
        status, body, headers = get(web.url + "/queues")
        assert status == 200 and "default" in body
        assert headers["Server"] == "rfetch"
        status, body, _ = get(web.url + "/metrics")
        assert status == 200 and "rfetch_queue_jobs" in body
    finally:
        assert web.stop() == 0


@pytest.mark.parametrize("prefix", ["/rfetch"])
def test_prefix_read_only_and_basic_auth(redis_server: RedisServer, r: redis.Redis,
                                         tmp_path: Path, prefix: str) -> None:
    web = WebProcess(redis_server.url, ["--read-only"], log_dir=tmp_path, prefix=prefix,
                     env={"RFETCH_WEB_USER": "ops", "RFETCH_WEB_PASSWORD": "pw"})
    try:
        web.wait_ready()
        assert "read-only, basic auth" in web.log()
        assert get(web.url + "/")[0] == 401
        auth = {"Authorization": "Basic " + base64.b64encode(b"ops:pw").decode()}
        status, body, _ = get(web.url + "/", auth)
        assert status == 200 and 'href="/rfetch/retries"' in body and "read-only" in body
        assert get(f"http://127.0.0.1:{web.port}/retries", auth)[0] == 404
    finally:
        web.stop()


def test_only_one_credential_is_refused(redis_server: RedisServer, tmp_path: Path) -> None:
    web = WebProcess(redis_server.url, log_dir=tmp_path, env={"RFETCH_WEB_USER": "ops"})
    assert web.proc.wait(20) == 1
    assert "set both RFETCH_WEB_USER and RFETCH_WEB_PASSWORD" in web.log()
    web.stop()
