"""A limiter's definition and its checks: names, limits, periods and rates.

Sidekiq Enterprise's rules: a name is letters, digits, ``-`` and ``_`` (static, ``"erp"``,
or dynamic, ``f"stripe-{user_id}"``); a period is a number of seconds or a unit (``second``,
``minute``, ``hour``, ``day``). Everything here raises :class:`rfetch.ConfigError` where
the limiter is created, never at its first call.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from rfetch.errors import ConfigError

Kind = Literal["window", "bucket", "leaky", "points", "concurrent"]

NAME = re.compile(r"[A-Za-z0-9_-]{1,200}")
"""A limiter name: letters, digits, ``-`` and ``_`` (Sidekiq Enterprise's rule), at most
200 characters."""

UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip
"""Period units accepted in a string (``"minute"``, ``"5m"``, ``"10/s"``)."""

_PERIOD = re.compile(r"\s*(\d+(?:\.\d+)?)?\s*([a-z]+)?\s*")
_RATE = re.compile(r"\s*(\d+)\s*/\s*(.+)")

DEFAULT_WAIT_TIMEOUT = 5.0
"""Seconds ``within_limit`` waits for capacity before raising ``OverLimit`` (Sidekiq
Enterprise's default)."""

DEFAULT_TTL = 90 * 86400.0
"""Seconds a limiter's hash lives after its last call (its counters go with it)."""

DEFAULT_RESCHEDULE = 20
"""Reschedules of a job over the limit before it fails normally."""

Backoff = Callable[[int, dict[str, Any]], float]
"""The delay, in seconds, before over-limit reschedule number ``n`` (0-based) of a job,
given ``n`` and the job's payload."""


def default_backoff(count: int, rng: random.Random | None = None) -> float:
    """Sidekiq Enterprise's over-limit backoff: ``300 * count + rand(300) + 1`` seconds
    (about 5 minutes more at each reschedule)."""
    return float(300 * count + (rng or random).randrange(300) + 1)


def parse_period(value: float | str) -> float:
    """A period in seconds: a positive finite number, or a string such as ``"second"``,
    ``"minute"``, ``"5m"``, ``"30s"``, ``"1.5h"``, ``"2 days"``.

    Raises:
        ConfigError: not positive, not finite, or an unknown unit.
    """
    if isinstance(value, bool):
        raise ConfigError(f"limiter period {value!r} is not a number of seconds or a unit")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = _PERIOD.fullmatch(value.lower())
        unit = match.group(2) if match else None
        if match is None or (unit is None and match.group(1) is None) or (
            unit is not None and unit not in UNITS
        ):
            raise ConfigError(
                f"limiter period {value!r} is not understood: give seconds (1.5) or a unit "
                f"({', '.join(sorted({'second', 'minute', 'hour', 'day'}))}, 5m, 30s)"
            )
        seconds = float(match.group(1) or 1) * UNITS[unit or "s"]
    else:
        raise ConfigError(f"limiter period {value!r} is not a number of seconds or a unit")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"limiter period must be positive, got {value!r}")
    if seconds < 0.001:
        raise ConfigError(f"limiter period {value!r} is shorter than a millisecond")
    return seconds


def parse_rate(text: str) -> tuple[int, float]:
    """``"<count>/<period>"`` (``"100/s"``, ``"50/minute"``, ``"1000/5m"``) as (limit,
    period seconds).

    Raises:
        ConfigError: not of that form, or a non-positive count or period.
    """
    match = _RATE.fullmatch(text)
    if match is None:
        raise ConfigError(f"limiter rate {text!r} is not understood: write it as 100/s, 50/minute")
    return check_limit(int(match.group(1))), parse_period(match.group(2))


def check_name(name: object) -> str:
    """The limiter name, checked.

    Raises:
        ConfigError: not a string of letters, digits, ``-`` and ``_`` (1-200 characters).
    """
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise ConfigError(
            f"limiter name {name!r} must be 1-200 letters, digits, '-' or '_' "
            "(use f'stripe-{user_id}' for a limiter per user)"
        )
    return name


def check_limit(limit: object, what: str = "limit") -> int:
    """A positive integer limit.

    Raises:
        ConfigError: not an int (bool excluded) or not positive.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ConfigError(f"limiter {what} must be a positive integer, got {limit!r}")
    return limit


def check_seconds(value: object, what: str, *, zero: bool = False) -> float:
    """A finite number of seconds, positive (or also 0 when ``zero``).

    Raises:
        ConfigError: otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"limiter {what} must be a number of seconds, got {value!r}")
    if value < 0 or (value == 0 and not zero):
        raise ConfigError(f"limiter {what} must be {'>= 0' if zero else 'positive'}, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Spec:
    """A checked limiter definition.

    Attributes:
        kind: the limiter's kind.
        name: its name.
        limit: grants per period (window, bucket, leaky), points per period (points), or
            locks at once (concurrent).
        period: seconds (0 for concurrent).
        wait_timeout: seconds ``within_limit`` waits for capacity (0: one attempt).
        ttl: seconds the limiter's hash lives after its last call.
        reschedule: over-limit reschedules of a job before it fails normally.
        backoff: the reschedule delay (None: :func:`default_backoff`).
        lock_timeout: concurrent only: seconds after which the lock of a holder that
            stopped renewing it (killed, stopped) is reclaimed.
        burst: leaky only: calls that may go at once before the smooth rate applies.
    """

    kind: Kind
    name: str
    limit: int
    period: float
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    ttl: float = DEFAULT_TTL
    reschedule: int = DEFAULT_RESCHEDULE
    backoff: Backoff | None = None
    lock_timeout: float = 0.0
    burst: int = 1

    @property
    def capacity(self) -> int:
        """Units the bucket holds: ``burst`` for leaky, else ``limit``."""
        return self.burst if self.kind == "leaky" else self.limit


def build(
    kind: Kind,
    name: object,
    limit: object,
    per: float | str | None,
    *,
    wait_timeout: object = DEFAULT_WAIT_TIMEOUT,
    ttl: object = DEFAULT_TTL,
    reschedule: object = DEFAULT_RESCHEDULE,
    backoff: Backoff | None = None,
    lock_timeout: object = 0.0,
    burst: object = 1,
) -> Spec:
    """Check every argument of a limiter and return its :class:`Spec`.

    ``limit`` may be a rate string (``"100/s"``) when ``per`` is None.

    Raises:
        ConfigError: a bad name, limit, period, rate, timeout, TTL, reschedule count,
            backoff or burst.
    """
    checked_name = check_name(name)
    if isinstance(limit, str):
        if per is not None:
            raise ConfigError(f"limiter {checked_name}: give a rate string or per=, not both")
        count, period = parse_rate(limit)
    else:
        count = check_limit(limit)
        period = 0.0 if kind == "concurrent" else parse_period(1.0 if per is None else per)
    ttl_s = check_seconds(ttl, "ttl")
    if isinstance(reschedule, bool) or not isinstance(reschedule, int) or reschedule < 0:
        raise ConfigError(f"limiter reschedule must be an integer >= 0, got {reschedule!r}")
    if backoff is not None and not callable(backoff):
        raise ConfigError(f"limiter backoff must be callable(count, job), got {backoff!r}")
    lock_s = 0.0
    if kind == "concurrent":
        lock_s = check_seconds(lock_timeout, "lock_timeout")
        if ttl_s < 2 * lock_s:
            raise ConfigError(f"limiter ttl ({ttl_s} s) must be at least 2 x lock_timeout")
    if ttl_s < 2 * period:
        raise ConfigError(f"limiter ttl ({ttl_s} s) must be at least twice its period")
    return Spec(
        kind=kind,
        name=checked_name,
        limit=count,
        period=period,
        wait_timeout=check_seconds(wait_timeout, "wait_timeout", zero=True),
        ttl=ttl_s,
        reschedule=reschedule,
        backoff=backoff,
        lock_timeout=lock_s,
        burst=check_limit(burst, "burst"),
    )
