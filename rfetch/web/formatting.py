"""Jinja filters of the web UI.

Figures, times, durations and payloads are formatted by :mod:`rfetch.formatting` (the same
formatters as the CLI and ``explain``); this module adds what only the UI needs: the names
of sorted-set entries in URLs and forms, and markup that lets long class names wrap.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from typing import Any

from markupsafe import Markup, escape

from rfetch import formatting
from rfetch.api import JobRecord
from rfetch.formatting import DASH, safe_url
from rfetch.observability.stats import BUCKETS_MS

__all__ = ["DASH", "FILTERS", "entry_key", "parse_entry_key", "safe_url"]

TENTHS_BELOW = 10.0
"""Durations shorter than this many seconds show tenths (``4.2 seconds``)."""


def span(seconds: float | None) -> str:
    """A duration in seconds for people: ``0.4 seconds``, ``42 seconds``, ``3 minutes``,
    ``2 hours``, ``29 days`` (:func:`rfetch.formatting.duration`); a dash for None."""
    if seconds is None:
        return DASH
    return formatting.duration(seconds, tenths_below=TENTHS_BELOW)


def relative(at: float | None, now: float | None = None) -> str:
    """``in 3 minutes``, ``42 seconds ago`` or ``now`` (epoch seconds; ``now`` defaults to
    the clock)."""
    if at is None:
        return DASH
    return formatting.relative(at, time.time() if now is None else now,
                               tenths_below=TENTHS_BELOW)


def run_time(ms: float | None) -> str:
    """A percentile of the run-time histogram (milliseconds, an upper bound): ``≤ 5 ms``,
    ``≤ 2 s``, ``> 1 h`` above the last bucket of :data:`rfetch.observability.stats.BUCKETS_MS`."""
    return formatting.run_time(ms, BUCKETS_MS[-1])


def breakable(text: str | None) -> Markup:
    """Escaped ``text`` that may wrap after each ``.`` and ``::`` (long class names)."""
    escaped = str(escape(text or ""))  # entities hold no dot or colon
    return Markup(escaped.replace(".", ".<wbr>").replace("::", "::<wbr>"))


def entry_key(record: JobRecord) -> str:
    """How the UI names an entry of a sorted set: ``<score>-<digest of its bytes>``.

    The score finds the entry in O(log N) (``ZRANGEBYSCORE``), the digest picks it among
    those with the same score; unlike a jid it also names entries that are not jobs.
    """
    return f"{record.score!r}-{digest(record.raw)}"


def digest(raw: bytes) -> str:
    """16 hex digits of the SHA-256 of a stored entry."""
    return hashlib.sha256(raw).hexdigest()[:16]


def parse_entry_key(key: str) -> tuple[float, str] | None:
    """``(score, digest)`` from :func:`entry_key`, or None if malformed."""
    score_text, sep, hexdigest = key.rpartition("-")
    if not sep or len(hexdigest) != 16:
        return None
    try:
        int(hexdigest, 16)
        score = float(score_text)
    except ValueError:
        return None
    if math.isnan(score) or math.isinf(score):
        return None
    return score, hexdigest


FILTERS: dict[str, Callable[..., Any]] = {
    "number": formatting.number,
    "utc": formatting.utc_time,
    "iso": formatting.iso_time,
    "span": span,
    "relative": relative,
    "run_time": run_time,
    "memory": formatting.memory,
    "to_json": formatting.to_json,
    "pretty": formatting.pretty,
    "shorten": formatting.shorten,
    "entry_key": entry_key,
    "breakable": breakable,
}
"""The Jinja filters the templates use, by name."""
