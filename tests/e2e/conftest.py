"""Browser tests: Debian's headless Chromium driven by Playwright, against a real
``rfetch web`` process and a real Redis.

Skipped, with the reason, when /usr/bin/chromium or the playwright package is missing
(``apt-get install chromium``; ``pip install playwright``; never ``playwright install``:
the tests use the system browser).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, browser_missing
from tests.support.redis_server import RedisServer
from tests.support.web import WebProcess


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    # Package scope, not session: Playwright's sync API keeps an asyncio loop marked as
    # running in this thread while it is open, and the tiers collected after tests/e2e
    # (tests/unit among them) call asyncio.run().
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def web_server(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory,
               ) -> Iterator[WebProcess]:
    """One ``rfetch web`` for the session (it keeps no state: each test flushes Redis)."""
    web = WebProcess(redis_server.url, ["--poll-interval", "1"],
                     log_dir=tmp_path_factory.mktemp("web"))
    web.wait_ready()
    yield web
    web.stop()


class PageErrors(list[str]):
    """Console errors and uncaught exceptions seen by a page (CSP violations included)."""


@pytest.fixture
def page(browser: Any, web_server: WebProcess, r: redis.Redis) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT, base_url=web_server.url)
    context.set_default_timeout(15_000)
    new_page = context.new_page()
    errors = PageErrors()
    new_page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    new_page.on("pageerror", lambda exc: errors.append(str(exc)))
    new_page.on("dialog", lambda dialog: dialog.accept())  # confirm() of risky buttons
    new_page.errors = errors
    yield new_page
    context.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    return tmp_path
