"""The web UI at phone width (375 px): every nav link stays visible and tappable, and no
page scrolls sideways because of the header."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis

PHONE = {"width": 375, "height": 740}
NAV = ["Dashboard", "Busy", "Queues", "Retries", "Scheduled", "Dead", "Job classes",
       "Keys & tenants", "Limits", "Find a job"]


def test_nav_is_usable_at_phone_width(page: Any, r: redis.Redis, shots: Path) -> None:
    page.set_viewport_size(PHONE)
    for path in ("/", "/queues", "/retries"):
        page.goto(path)
        page.screenshot(path=str(shots / f"phone{path.replace('/', '_')}.png"), full_page=True)
        for label in NAV:
            link = page.locator("nav.nav a", has_text=label).first
            box = link.bounding_box()
            assert box is not None, label
            assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (path, label)
            assert box["width"] > 20 and box["height"] > 20, (path, label)
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= PHONE["width"], (path, scroll)
    page.locator("nav.nav a", has_text="Dead").first.click()
    page.wait_for_url("**/dead")
    assert page.errors == []
