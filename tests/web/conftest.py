"""Fixtures of the web UI tests: a seeded Redis, the app, and a Werkzeug test client."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from werkzeug.test import Client, TestResponse

from rfetch.api import Api
from rfetch.config import Config
from rfetch.web import WebApp, create_app

XSS = "<script>alert('x')</script>"
IDENTITY = "web-1:4242:0123456789ab"


def jid_of(i: int) -> str:
    return f"{i:024x}"


def payload(jid: str, cls: str = "app.Mail", args: list[Any] | None = None,
            queue: str = "default", **extra: Any) -> str:
    """A job as Ruby's Sidekiq writes it (compact JSON)."""
    body = {"class": cls, "args": args if args is not None else [], "jid": jid,
            "queue": queue, "created_at": 1_700_000_000.0, **extra}
    return json.dumps(body, separators=(",", ":"))


def failed(jid: str, cls: str = "app.Mail", args: list[Any] | None = None,
           retry_count: int = 0, error: str = "timeout", **extra: Any) -> str:
    return payload(jid, cls, args, retry_count=retry_count, error_class="IOError",
                   error_message=error, failed_at=1_700_000_100.0, **extra)


def add_process(r: redis.Redis, identity: str = IDENTITY, *, busy: int = 1,
                quiet: bool = False, running: list[str] | None = None) -> None:
    """A heartbeat as a worker writes it, with running jobs in ``<identity>:work``."""
    info = {"hostname": "web-1", "pid": 4242, "tag": "api", "concurrency": 5,
            "queues": ["default", "mail"], "labels": ["blue"], "started_at": time.time() - 90,
            "version": "0.1.0"}
    r.sadd("processes", identity)
    r.hset(identity, mapping={"info": json.dumps(info), "busy": busy, "beat": time.time(),
                              "quiet": "true" if quiet else "false", "rss": 51200})
    for i, job in enumerate(running or []):
        r.hset(f"{identity}:work", f"t{i}", json.dumps(
            {"queue": "default", "payload": job, "run_at": time.time() - 3}))


@pytest.fixture
def api(config: Config, r: redis.Redis) -> Api:
    return Api(config, redis=r)


@pytest.fixture
def make_app(config: Config, r: redis.Redis) -> Callable[..., WebApp]:
    def build(**options: Any) -> WebApp:
        options.setdefault("basic_auth", False)
        return create_app(config, redis=r, **options)

    return build


@pytest.fixture
def app(make_app: Callable[..., WebApp]) -> WebApp:
    return make_app()


@pytest.fixture
def client(app: WebApp) -> Client:
    return Client(app)


TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def token_of(client: Client, path: str = "/queues") -> str:
    """The CSRF token a page's forms carry (the GET also sets the cookie)."""
    response = client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    found = TOKEN.search(response.get_data(as_text=True))
    if found:
        return found.group(1)
    cookie = client.get_cookie("rfetch_csrf")
    assert cookie is not None
    return cookie.value


def post(client: Client, path: str, data: dict[str, Any], *, token: str | None = None,
         page: str = "/queues", **kwargs: Any) -> TestResponse:
    """POST a form with the CSRF token taken from ``page`` (or the one given)."""
    body = dict(data)
    body["csrf_token"] = token if token is not None else token_of(client, page)
    return client.post(path, data=body, **kwargs)


def text(response: TestResponse) -> str:
    """The body, without the invisible ``<wbr>`` that lets long class names wrap."""
    return response.get_data(as_text=True).replace("<wbr>", "")


def flash(client: Client, response: TestResponse) -> str:
    """Follow a POST's 303 and return the flash message shown."""
    assert response.status_code == 303, text(response)[:800]
    page = client.get(response.headers["Location"])
    found = re.search(r'<div class="flash flash-(\w+)" role="status">([^<]*)</div>', text(page))
    assert found, "no flash message"
    return found.group(2)
