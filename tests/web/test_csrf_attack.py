"""The planted-cookie CSRF attack on a real ``rfetch web``, from a second origin.

A page served from another port of the same host is the same *site* (cookies ignore ports,
and so does ``SameSite``): it can set its own ``rfetch_csrf`` cookie with a longer path, which
the browser then sends before the real one, and post a form carrying the value it planted.
The attacker here is a real HTTP server on another port (``tests/support/attacker.py``;
``tests/e2e/test_csrf_browser.py`` runs the same attack in Chromium); the victim's browser
is a cookie jar (``http.cookiejar`` sends the cookie of the longest path first, as browsers
do) that adds the ``Origin`` and ``Sec-Fetch-Site`` headers a browser adds to a form's POST.
"""

from __future__ import annotations

import http.cookiejar
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.attacker import DELETE_ALL_DEAD, PLANTED, AttackerSite
from tests.support.redis_server import RedisServer
from tests.support.seed import jid_of
from tests.support.web import WebProcess, failed, token_in


class Browser:
    """One victim's browser: a cookie jar, redirects not followed (the answer is the test)."""

    def __init__(self) -> None:
        self.jar = http.cookiejar.CookieJar()

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None

        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), NoRedirect()
        )

    def request(self, url: str, form: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, str]:
        data = None if form is None else urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(url, data=data, headers=headers or {})
        try:
            with self.opener.open(request, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def cookie_values(self) -> list[str]:
        return [c.value or "" for c in self.jar if c.name == "rfetch_csrf"]


@pytest.fixture
def web(redis_server: RedisServer, tmp_path: Path) -> Iterator[WebProcess]:
    process = WebProcess(redis_server.url, log_dir=tmp_path)
    try:
        process.wait_ready()
        yield process
    finally:
        assert process.stop() == 0


@pytest.fixture
def attacker(web: WebProcess) -> Iterator[AttackerSite]:
    site = AttackerSite(web.url)
    try:
        yield site
    finally:
        site.close()


def forged_form(browser: Browser, attacker: AttackerSite) -> tuple[str, dict[str, str]]:
    """Visit the attacker's page (which plants the cookie); its form's target and fields."""
    status, page = browser.request(attacker.origin + "/")
    assert status == 200
    action = re.search(r'action="([^"]+)"', page)
    assert action is not None
    return action.group(1), dict(re.findall(r'name="([^"]+)" value="([^"]*)"', page))


@pytest.mark.parametrize("headers", ["same-site", "origin-only", "none"])
def test_a_planted_cookie_and_its_value_in_the_form_are_refused(
    web: WebProcess, attacker: AttackerSite, r: redis.Redis, headers: str
) -> None:
    """The victim holds the real cookie; the attacker's page plants its own (path /dead,
    sent first) and posts "delete every dead job" with the planted value. Refused, what
    ever the browser says of the origin: ``Sec-Fetch-Site: same-site`` (current browsers),
    a foreign ``Origin`` alone (older ones), or nothing at all (the token alone)."""
    r.zadd("dead", {failed(jid_of(i)): i for i in range(1, 4)})
    browser = Browser()
    status, page = browser.request(web.url + "/dead")
    assert status == 200
    real_token = token_in(page)
    url, form = forged_form(browser, attacker)
    assert url == web.url + "/dead"
    assert PLANTED in browser.cookie_values() and len(browser.cookie_values()) == 2

    sent = {
        "same-site": {"Sec-Fetch-Site": "same-site", "Origin": attacker.origin},
        "origin-only": {"Origin": attacker.origin},
        "none": {},
    }[headers]
    status, body = browser.request(url, form, sent)
    assert status == 403, body[:500]
    assert r.zcard("dead") == 3, "no dead job was deleted"

    # The real page's own form still works for this browser, planted cookie and all: the
    # token of its page (the planted cookie is sent first there too) or of the real cookie.
    status, page = browser.request(web.url + "/dead")
    assert status == 200
    for token in (token_in(page), real_token):
        r.zadd("dead", {failed(jid_of(9)): 9})
        own = {"Sec-Fetch-Site": "same-origin", "Origin": web.url}
        status, body = browser.request(web.url + "/dead", {**form, "csrf_token": token}, own)
        assert status == 303, body[:500]
        assert r.zcard("dead") == 0


def test_an_older_browser_posting_from_the_ui_itself_is_let_through(
    web: WebProcess, r: redis.Redis
) -> None:
    """No ``Sec-Fetch-Site``; an ``Origin`` naming the UI's own host: allowed."""
    r.zadd("dead", {failed(jid_of(1)): 1})
    browser = Browser()
    status, page = browser.request(web.url + "/dead")
    assert status == 200
    form = {"csrf_token": token_in(page), **DELETE_ALL_DEAD}
    status, body = browser.request(web.url + "/dead", form, {"Origin": web.url})
    assert status == 303, body[:500]
    assert r.zcard("dead") == 0


def test_web_processes_sharing_the_secret_key_accept_each_others_tokens(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """Two ``rfetch web`` behind one load balancer: a form of one posts to the other with
    RFETCH_WEB_SECRET_KEY set; without it each process draws its own key."""
    shared = {"RFETCH_WEB_SECRET_KEY": "a-key-for-this-deployment"}
    processes = [WebProcess(redis_server.url, env=shared, log_dir=tmp_path) for _ in range(2)]
    processes.append(WebProcess(redis_server.url, env={"RFETCH_WEB_SECRET_KEY": ""},
                                log_dir=tmp_path))
    one, two, alone = processes
    try:
        for process in processes:
            process.wait_ready()
        browser = Browser()  # one cookie for 127.0.0.1, whatever the port
        status, page = browser.request(one.url + "/dead")
        assert status == 200
        form = {"csrf_token": token_in(page), **DELETE_ALL_DEAD}
        r.zadd("dead", {failed(jid_of(1)): 1})
        assert browser.request(alone.url + "/dead", form)[0] == 403
        assert r.zcard("dead") == 1
        assert browser.request(two.url + "/dead", form)[0] == 303
        assert r.zcard("dead") == 0
    finally:
        for process in processes:
            assert process.stop() == 0


def test_a_short_secret_key_or_a_bad_trusted_origin_stops_rfetch_web(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    for env, args, message in (
        ({"RFETCH_WEB_SECRET_KEY": "short"}, [], "at least 16 characters"),
        ({}, ["--trusted-origin", "admin.example.com"], "not of the form"),
    ):
        process = WebProcess(redis_server.url, args, env=env, log_dir=tmp_path)
        assert process.wait(20) == 1
        assert message in process.log()
