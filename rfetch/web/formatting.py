"""Jinja filters: numbers, times, durations, job arguments, and the history chart."""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from markupsafe import Markup, escape

from rfetch.api import DayStats, JobRecord
from rfetch.api.explain import fmt_delta

DASH = "\u2013"
"""An en dash: what a missing value shows."""


def number(value: int | float | None) -> str:
    """``1234567`` as ``1,234,567``; None as an en dash."""
    if value is None:
        return DASH
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def utc(at: float | None) -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if at is None:
        return DASH
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def iso(at: float | None) -> str:
    """Epoch seconds as ISO 8601 (for ``<time datetime>``)."""
    if at is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def span(seconds: float | None) -> str:
    """A duration for people: ``0.4 s``, ``42 s``, ``3.5 min``, ``2.0 h``, ``4.1 days``
    (the API's :func:`rfetch.api.explain.fmt_delta`, with tenths below 10 s)."""
    if seconds is None:
        return DASH
    s = abs(seconds)
    return f"{s:.1f} s" if s < 10 else fmt_delta(s)


def relative(at: float | None, now: float | None = None) -> str:
    """``in 3.5 min`` or ``42 s ago``."""
    if at is None:
        return DASH
    delta = at - (time.time() if now is None else now)
    if abs(delta) < 1:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def run_time(ms: float | None) -> str:
    """A percentile from the run-time histogram (an upper bound): ``≤ 5 ms``, ``≤ 2 s``,
    ``> 60 s``."""
    if ms is None:
        return DASH
    if math.isinf(ms):
        return "> 60 s"
    return f"≤ {ms:g} ms" if ms < 1000 else f"≤ {ms / 1000:g} s"


def memory(n_bytes: int | float | None) -> str:
    """Bytes as ``12.3 MB``."""
    if n_bytes is None:
        return DASH
    value = float(n_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"  # pragma: no cover


def to_json(value: Any, limit: int | None = None) -> str:
    """Compact JSON text, cut to ``limit`` characters with an ellipsis."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    if limit is not None and len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def pretty(value: Any) -> str:
    """Indented JSON for the job detail view."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def breakable(text: str | None) -> Markup:
    """Escaped ``text`` that may wrap after each ``.`` and ``::`` (long class names)."""
    escaped = str(escape(text or ""))  # entities hold no dot or colon
    return Markup(escaped.replace(".", ".<wbr>").replace("::", "::<wbr>"))


def shorten(text: str | None, limit: int = 120) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def safe_url(url: str) -> str:
    """A Redis URL without its password (shown in the page header)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparsable URL)"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else "***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


NICE_STEPS = (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)


@dataclass(frozen=True)
class Bar:
    """One day of the history chart (SVG coordinates)."""

    x: float
    width: float
    processed_y: float
    processed_h: float
    failed_y: float
    failed_h: float
    label: str
    title: str
    show_label: bool


@dataclass(frozen=True)
class HistoryChart:
    """Geometry of the history bar chart, drawn as inline SVG by the template."""

    width: int
    height: int
    top: int
    bottom: int
    left: int
    bars: list[Bar]
    ticks: list[tuple[float, str]]


def history_chart(days: list[DayStats], width: int = 1000, height: int = 220) -> HistoryChart:
    """Bars for ``days`` (newest first, as ``api.history`` returns them), oldest on the left."""
    ordered = list(reversed(days))
    left, top, bottom = 56, 10, 26
    plot_h = height - top - bottom
    peak = max([d.processed for d in ordered] + [1])
    scale = _nice_ceiling(peak)
    slot = (width - left - 8) / max(len(ordered), 1)
    bar_w = max(slot * 0.7, 1.0)
    every = max(1, math.ceil(len(ordered) / 10))
    bars = []
    for i, day in enumerate(ordered):
        ph = plot_h * day.processed / scale
        fh = plot_h * min(day.failed, day.processed or day.failed) / scale
        x = left + i * slot + (slot - bar_w) / 2
        bars.append(
            Bar(
                x=round(x, 1),
                width=round(bar_w, 1),
                processed_y=round(top + plot_h - ph, 1),
                processed_h=round(ph, 1),
                failed_y=round(top + plot_h - fh, 1),
                failed_h=round(fh, 1),
                label=day.date[5:],
                title=f"{day.date}: {day.processed:,} processed, {day.failed:,} failed",
                show_label=(len(ordered) - 1 - i) % every == 0,
            )
        )
    ticks = [(round(top + plot_h - plot_h * f, 1), _short(scale * f)) for f in (0, 0.5, 1)]
    return HistoryChart(width, height, top, bottom, left, bars, ticks)


def _nice_ceiling(value: float) -> float:
    """The smallest "round" number (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^n) at or above
    ``value``."""
    exponent = 10 ** math.floor(math.log10(value))
    for step in NICE_STEPS:
        if step * exponent >= value:
            return float(step * exponent)
    return float(10 * exponent)  # pragma: no cover


def _short(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"
