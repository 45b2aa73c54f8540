"""Human-readable figures: counts, sizes, times, durations and job payload summaries.

The one set of formatters used by the CLI's tables, the web UI's templates, ``explain``'s
sentences and the start-up messages, so a duration or a time reads the same everywhere.
Pure functions on plain values; counts, durations and sizes are worded by the ``humanize``
library, this module picks its options. The read/admin API, the web UI and the worker may
all import this module, and it imports none of them.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import humanize

DASH = "\u2013"
"""An en dash: what a missing value shows in the web UI."""


def number(value: int | float | None, missing: str = DASH) -> str:
    """``1234567`` as ``1,234,567``; a fractional float with one decimal (``2.5``).

    Args:
        value: the figure, or None (shown as ``missing``).
        missing: text for None.
    """
    if value is None:
        return missing
    if isinstance(value, float) and not value.is_integer():
        return humanize.intcomma(value, ndigits=1)
    return humanize.intcomma(int(value))


def utc_time(at: float | None, *, zone: bool = True, missing: str = DASH) -> str:
    """Epoch seconds as ``YYYY-MM-DD HH:MM:SS UTC`` (``zone=False``: without `` UTC``).

    Args:
        at: epoch seconds, or None (shown as ``missing``).
        zone: append `` UTC`` (a table whose header names the zone leaves it out).
        missing: text for None.
    """
    if at is None:
        return missing
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))
    return f"{text} UTC" if zone else text


def iso_time(at: float | None) -> str:
    """Epoch seconds as ISO 8601 UTC (``2024-05-01T12:00:00Z``, for ``<time datetime>``);
    empty for None."""
    if at is None:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def duration(seconds: float, *, tenths_below: float = 0.0) -> str:
    """A duration in seconds for people (:func:`humanize.naturaldelta`, days rather than
    months): ``42 seconds``, ``3 minutes``, ``2 hours``, ``29 days``.

    Args:
        seconds: the duration (its sign is ignored).
        tenths_below: show tenths of a second below this many seconds (``0.4 seconds``);
            the web UI gives 10, ``explain`` 0 (whole units: ``a moment`` below 1 s).
    """
    s = abs(seconds)
    if s < tenths_below:
        return humanize.precisedelta(s, minimum_unit="seconds", format="%0.1f")
    return humanize.naturaldelta(s, months=False)


def relative(at: float, now: float, *, tenths_below: float = 0.0) -> str:
    """``in 3 minutes`` or ``42 seconds ago``: epoch seconds ``at`` seen from epoch seconds
    ``now``.

    With ``tenths_below`` (see :func:`duration`), less than a second away reads ``now``.
    """
    delta = at - now
    if tenths_below and abs(delta) < 1:
        return "now"
    text = duration(delta, tenths_below=tenths_below)
    return f"in {text}" if delta >= 0 else f"{text} ago"


def run_time(ms: float | None, last_bound_ms: float, missing: str = DASH) -> str:
    """A run-time percentile read from a histogram, i.e. an upper bound: ``≤ 5 ms``,
    ``≤ 2 s``, ``≤ 10 min``; ``> <last bound>`` when it fell in the overflow bucket.

    Args:
        ms: the bucket's upper bound in milliseconds, ``inf`` for the overflow bucket, or
            None (no execution; shown as ``missing``).
        last_bound_ms: the histogram's last finite bound, milliseconds.
        missing: text for None.
    """
    if ms is None:
        return missing
    if math.isinf(ms):
        return f"> {_bound(last_bound_ms)}"
    return f"≤ {_bound(ms)}"


def _bound(ms: float) -> str:
    if ms < 1000:
        return f"{ms:g} ms"
    if ms < 120_000:
        return f"{ms / 1000:g} s"
    if ms < 3_600_000:
        return f"{ms / 60_000:g} min"
    return f"{ms / 3_600_000:g} h"


def memory(n_bytes: int | float | None, missing: str = DASH) -> str:
    """Bytes as ``512 Bytes``, ``12.3 MiB``, ``2.0 GiB`` (:func:`humanize.naturalsize`,
    powers of 1024)."""
    if n_bytes is None:
        return missing
    return humanize.naturalsize(n_bytes, binary=True, format="%.1f")


def shorten(text: str | None, limit: int = 120, ellipsis: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters, ending with ``ellipsis`` when cut."""
    if not text:
        return ""
    return text if len(text) <= limit else text[: limit - len(ellipsis)] + ellipsis


def to_json(value: Any, limit: int | None = None) -> str:
    """Compact one-line JSON (``[1, "a"]``), cut to ``limit`` characters with ``…``."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    return text if limit is None else shorten(text, limit)


def pretty(value: Any) -> str:
    """Indented JSON with sorted keys (a job's detail view)."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)


def one_line(value: Any, limit: int, ellipsis: str = "…") -> str:
    """A payload field on one line (a table cell, a summary): a string as it is, anything
    else as compact JSON; newlines become spaces; cut to ``limit`` characters."""
    text = value if isinstance(value, str) else to_json(value)
    return shorten(text.replace("\n", " "), limit, ellipsis)


def safe_url(url: str) -> str:
    """A Redis URL with its password replaced by ``***`` (for headers, logs and errors)."""
    if url.startswith("redis+sentinel://"):  # several hosts: no urlsplit port
        head, at, tail = url.rpartition("@")
        user, colon, _ = head[len("redis+sentinel://"):].partition(":")
        return f"redis+sentinel://{user}{':***' if colon else ''}@{tail}" if at else url
    try:
        parts = urlsplit(url)
        password, port = parts.password, parts.port
    except ValueError:
        return "(unparsable URL)"
    if password is None:
        return url
    host = parts.hostname or ""
    if port:
        host = f"{host}:{port}"
    user = f"{parts.username}:***@" if parts.username else "***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))
