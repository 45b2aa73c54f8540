"""The planted-cookie CSRF attack in a real browser: Chromium visits a page on another port
of 127.0.0.1 (the same site as the UI), which plants its own ``rfetch_csrf`` cookie with the
path ``/dead`` and submits "delete every dead job" with the planted value."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.support.attacker import PLANTED, AttackerSite
from tests.support.seed import jid_of
from tests.support.web import WebProcess, failed


@pytest.fixture
def attacker(web_server: WebProcess) -> Iterator[AttackerSite]:
    site = AttackerSite(web_server.url, auto_submit=True)
    try:
        yield site
    finally:
        site.close()


def test_a_page_of_another_port_cannot_delete_the_dead_jobs(
    page: Any, r: redis.Redis, attacker: AttackerSite, web_server: WebProcess
) -> None:
    r.zadd("dead", {failed(jid_of(i)): i for i in range(1, 4)})
    page.goto("/dead")  # the victim holds the UI's real cookie
    answer = page.goto(attacker.origin + "/")  # plants its cookie, submits its form
    assert answer is not None
    page.wait_for_url(web_server.url + "/dead")
    cookies = [c["value"] for c in page.context.cookies() if c["name"] == "rfetch_csrf"]
    assert PLANTED in cookies and len(cookies) == 2
    assert "Sec-Fetch-Site: same-site" in page.inner_text("main")  # what Chromium says
    assert r.zcard("dead") == 3, "no dead job was deleted"

    # The UI's own page still works in this browser, planted cookie and all.
    page.goto("/dead")
    page.click("form.matching >> text=Delete")
    page.wait_for_selector(".flash-ok")
    assert r.zcard("dead") == 0
