"""The web UI at a laptop's width and a phone's: every nav entry is on screen and the one
thing under its middle (never scrolled out of the nav, clipped or covered by the search)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

NAV = ["Dashboard", "Busy", "Queues", "Retries", "Scheduled", "Dead", "Job classes",
       "Keys & tenants", "Periodic", "Batches", "Limits", "Find a job"]

# Each nav link: its box and whether the element at its centre is the link itself.
PROBE = """() => Array.from(document.querySelectorAll('nav.nav a')).map(a => {
  const box = a.getBoundingClientRect();
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  return {label: a.textContent.trim(), left: box.left, right: box.right, top: box.top,
          bottom: box.bottom, width: box.width, height: box.height,
          shown: hit !== null && hit.closest('a') === a};
})"""


@pytest.mark.parametrize("width", [1400, 1280, 375])
def test_every_nav_entry_is_visible(page: Any, r: redis.Redis, shots: Path,
                                    width: int) -> None:
    page.set_viewport_size({"width": width, "height": 800})
    for path in ("/", "/retries", "/explain"):
        page.goto(path)
        page.screenshot(path=str(shots / f"nav-{width}{path.replace('/', '_')}.png"))
        links = {link["label"]: link for link in page.evaluate(PROBE)}
        assert sorted(links) == sorted(NAV)
        for label, link in links.items():
            where = (width, path, label, link)
            assert link["width"] > 20 and link["height"] > 20, where
            assert link["left"] >= 0 and link["right"] <= width, where
            assert link["top"] >= 0 and link["bottom"] <= 800, where
            assert link["shown"], where
        scroll = page.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, (path, scroll)
    assert page.errors == []
