"""Jobs as Ruby's Sidekiq writes them, for tests that seed Redis by hand."""

from __future__ import annotations

import json
from typing import Any


def jid_of(i: int) -> str:
    """A valid jid (24 hex digits) made from ``i``, so that tests can name jobs by number."""
    return f"{i:024x}"


def payload(jid: str, cls: str = "app.Job", args: list[Any] | None = None,
            queue: str = "default", **extra: Any) -> str:
    """A job as Ruby's Sidekiq writes it (compact JSON); ``extra`` fields come last."""
    body = {"class": cls, "args": args if args is not None else [], "jid": jid,
            "queue": queue, **extra}
    return json.dumps(body, separators=(",", ":"))
