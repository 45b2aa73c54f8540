"""The web harnesses: a real ``rfetch web`` subprocess, the helpers of the Werkzeug test
client (CSRF token, form posts, flash messages) and the data the web tests seed (jobs,
failures and heartbeats as Ruby's Sidekiq writes them)."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import redis
from werkzeug.test import Client, TestResponse

from tests.support import seed
from tests.support.process import RfetchProcess
from tests.support.redis_server import free_port
from tests.support.wait import wait_for

WEB_AUTH_ENV = ("RFETCH_WEB_USER", "RFETCH_WEB_PASSWORD", "RFETCH_WEB_READ_ONLY")
"""Left out of the web process's environment: a test turns authentication on explicitly."""


class WebProcess(RfetchProcess):
    """``rfetch web --bind <host>:<free port>``; its output goes to a file. :attr:`url`
    reaches it through 127.0.0.1 whatever ``host`` it binds (``0.0.0.0`` included)."""

    def __init__(
        self,
        redis_url: str,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        prefix: str = "",
        host: str = "127.0.0.1",
    ) -> None:
        self.port = free_port()
        self.prefix = prefix
        command = ["--bind", f"{host}:{self.port}", *args]
        if prefix:
            command += ["--prefix", prefix]
        super().__init__("web", command, redis_url, env, log_dir, unset=WEB_AUTH_ENV)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def wait_ready(self, timeout: float = 60.0) -> None:
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


# -- seeded data ------------------------------------------------------------------------

XSS = "<script>alert('x')</script>"
IDENTITY = "web-1:4242:0123456789ab"


def payload(jid: str, cls: str = "app.Mail", args: list[Any] | None = None,
            queue: str = "default", **extra: Any) -> str:
    """A job of the web tests as Ruby's Sidekiq writes it: an ``app.Mail`` created at
    1,700,000,000 (epoch seconds)."""
    return seed.payload(jid, cls, args, queue, created_at=1_700_000_000.0, **extra)


def failed(jid: str, cls: str = "app.Mail", args: list[Any] | None = None,
           retry_count: int = 0, error: str = "timeout", **extra: Any) -> str:
    return payload(jid, cls, args, retry_count=retry_count, error_class="IOError",
                   error_message=error, failed_at=1_700_000_100.0, **extra)


def add_process(r: redis.Redis, identity: str = IDENTITY, *, busy: int = 1,
                quiet: bool = False, running: list[str] | None = None) -> None:
    """A heartbeat as a worker writes it, with running jobs in ``<identity>:work`` and,
    as a worker holds them until they end, in its private list of queue default."""
    info = {"hostname": "web-1", "pid": 4242, "tag": "api", "concurrency": 5,
            "queues": ["default", "mail"], "labels": ["blue"], "started_at": time.time() - 90,
            "version": "0.1.0"}
    r.sadd("processes", identity)
    r.hset(identity, mapping={"info": json.dumps(info), "busy": busy, "beat": time.time(),
                              "quiet": "true" if quiet else "false", "rss": 51200})
    for i, job in enumerate(running or []):
        r.hset(f"{identity}:work", f"t{i}", json.dumps(
            {"queue": "default", "payload": job, "run_at": time.time() - 3}))
        r.lpush(f"queue:sq|{identity}|default", job)


# -- the Werkzeug test client ---------------------------------------------------------------

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"|<meta name="csrf-token" content="([^"]+)">')


def token_in(html: str) -> str:
    """The CSRF token of a page: its forms' field, or the one its head names (every page's
    head does, for scripts that send it in the ``X-CSRF-Token`` header)."""
    found = TOKEN.search(html)
    assert found, "no CSRF token in the page"
    return found.group(1) or found.group(2)


def token_of(client: Client, path: str = "/queues") -> str:
    """The CSRF token a page's forms carry (the GET also sets the cookie)."""
    response = client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return token_in(response.get_data(as_text=True))


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
