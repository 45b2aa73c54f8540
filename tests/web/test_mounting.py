"""The app under a prefix: its own ``prefix``, a dispatcher's ``SCRIPT_NAME``, and ASGI."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.test import Client
from werkzeug.wrappers import Response

from rfetch.web import WebApp, normalize_prefix
from tests.support.seed import jid_of
from tests.support.web import failed, flash, post, text


def links(body: str) -> list[str]:
    return re.findall(r'(?:href|action|src|data-source)="([^"]+)"', body)


def assert_all_links_under(body: str, prefix: str) -> None:
    for link in links(body):
        if link.startswith("/"):
            assert link.startswith(prefix + "/"), link


def test_prefix_option(make_app: Callable[..., WebApp], r: redis.Redis) -> None:
    client = Client(make_app(prefix="rfetch/"))
    response = client.get("/rfetch/")
    assert response.status_code == 200
    body = text(response)
    assert_all_links_under(body, "/rfetch")
    assert 'href="/rfetch/retries"' in body
    assert client.get("/rfetch").status_code == 200
    assert client.get("/rfetch/static/rfetch.css").status_code == 200
    assert client.get("/").headers["Location"] == "/rfetch/"
    assert client.get("/retries").status_code == 404
    assert client.get("/rfetchx/").status_code == 404
    assert "Path=/rfetch" in response.headers["Set-Cookie"]
    # Actions work under the prefix and come back to it.
    r.zadd("retry", {failed(jid_of(1)): 1})
    response = post(client, "/rfetch/retries", {"action": "retry", "scope": "matching"},
                    page="/rfetch/retries")
    assert response.headers["Location"] == "/rfetch/retries"
    assert "Retried: 1 job(s)." in flash(client, response)
    assert r.llen("queue:default") == 1


def test_mounted_by_a_dispatcher_sets_script_name(app: WebApp, r: redis.Redis) -> None:
    """As in Flask: ``app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {"/ops/jobs": ui})``."""

    def host_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        return Response("host application")(environ, start_response)

    client = Client(DispatcherMiddleware(host_app, {"/ops/jobs": app}))
    assert text(client.get("/")) == "host application"
    response = client.get("/ops/jobs/queues")
    assert response.status_code == 200
    assert_all_links_under(text(response), "/ops/jobs")
    r.sadd("queues", "mail")
    response = post(client, "/ops/jobs/queues/mail", {"action": "pause"},
                    page="/ops/jobs/queues")
    assert response.headers["Location"] == "/ops/jobs/queues/mail"
    assert r.sismember("paused", "mail")
    assert client.get("/ops/jobs/metrics").status_code == 200


def test_asgi_through_a2wsgi(app: WebApp) -> None:
    """ASGI applications (Starlette, FastAPI, Django's ASGI) mount it through a2wsgi."""
    from a2wsgi import WSGIMiddleware

    asgi_app = WSGIMiddleware(app)  # type: ignore[arg-type]

    async def call(path: str) -> tuple[int, bytes]:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
            "root_path": "/jobs", "query_string": b"", "headers": [(b"host", b"testserver")],
            "server": ("testserver", 80), "client": ("127.0.0.1", 5000),
        }
        sent: list[dict[str, Any]] = []
        requests = [{"type": "http.request", "body": b"", "more_body": False}]

        async def receive() -> dict[str, Any]:
            if requests:
                return requests.pop(0)
            await asyncio.sleep(3600)
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await asgi_app(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return status, body

    def run(path: str) -> tuple[int, bytes]:
        # In a thread of its own: Playwright's sync API (tests/e2e) may hold an event
        # loop in this one.
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, call(path)).result()

    status, body = run("/jobs/retries")
    assert status == 200
    assert b'href="/jobs/dead"' in body
    status, body = run("/jobs/metrics")
    assert status == 200 and b"rfetch_processed_total" in body


def test_normalize_prefix() -> None:
    assert normalize_prefix("") == ""
    assert normalize_prefix("/") == ""
    assert normalize_prefix("rfetch") == "/rfetch"
    assert normalize_prefix("/a/b/") == "/a/b"
