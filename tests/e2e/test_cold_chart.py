"""The dashboard's live chart draws from data on a cold load: the page carries the totals
it was rendered with, so the first poll (made at once) gives a rate, and the chart does not
say "Waiting for data…" for a whole poll interval (30 s here)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.browser import VIEWPORT
from tests.support.redis_server import RedisServer
from tests.support.web import WebProcess

# Pixels of the canvas drawn in the "processed" colour (--processed: #2f6fde), give or take
# anti-aliasing: the line of jobs processed per second.
LINE_PIXELS = """() => {
  const canvas = document.getElementById('live-chart');
  const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let count = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (Math.abs(data[i] - 0x2f) < 24 && Math.abs(data[i + 1] - 0x6f) < 24
        && Math.abs(data[i + 2] - 0xde) < 24 && data[i + 3] > 200) { count += 1; }
  }
  return count;
}"""


@pytest.fixture
def slow_poll_web(redis_server: RedisServer, tmp_path: Path) -> Iterator[WebProcess]:
    web = WebProcess(redis_server.url, ["--poll-interval", "30"], log_dir=tmp_path)
    web.wait_ready()
    yield web
    web.stop()


@pytest.mark.parametrize("width", [1280, 375])
def test_the_live_chart_draws_on_a_cold_load(browser: Any, slow_poll_web: WebProcess,
                                             r: redis.Redis, tmp_path: Path,
                                             width: int) -> None:
    r.mset({"stat:processed": 1000, "stat:failed": 10})
    context = browser.new_context(viewport={**VIEWPORT, "width": width},
                                  base_url=slow_poll_web.url)
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        # The first poll finds 50 more jobs processed than the page was rendered with.
        page.route("**/stats.json", lambda route: route.fulfill(
            status=200, content_type="application/json",
            body=json.dumps({"time": time.time() + 5, "processed": 1050, "failed": 10})))
        page.goto("/")
        page.wait_for_selector("text=Updated")  # the first poll, made at load
        page.locator("#live-chart").scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / f"dashboard-{width}.png"), full_page=True)
        rate = page.inner_text("[data-live=processed]")
        assert rate != "\u2013" and float(rate) > 1, rate  # a rate, not a dash
        assert page.evaluate(LINE_PIXELS) > 10  # the line is drawn
        assert errors == []
    finally:
        context.close()
