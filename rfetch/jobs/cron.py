"""Cron expressions: parsing, time zones and the ticks they give, on the ``cronsim`` parser.

A tick is a whole second (epoch seconds, an ``int``) at which a schedule fires. Accepted:

* the standard 5 fields (minute hour day-of-month month day-of-week), with names (``JAN``,
  ``MON``), lists, ranges, steps, ``L``, ``LW``, ``MON#2`` as cronsim reads them;
* 6 fields, the first being seconds (``*/10 * * * * *``: every 10 s);
* the macros ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily``
  (``@midnight``) and ``@hourly``.

Time zones are IANA names read through :mod:`zoneinfo`. Daylight saving time follows
cronsim, which follows Debian's cron for 5-field expressions with a fixed minute and hour:
a wall time that does not exist (spring forward) fires once, at the first valid minute after
the gap; a wall time that happens twice (fall back) fires once, at its first occurrence.
Expressions whose hour field is ``*`` or that have a seconds field fire on real elapsed time
(every 5 minutes stays every 5 minutes through both changes).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from rfetch.errors import ConfigError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The usual cron macros (Vixie cron's names), as 5-field expressions."""

PERIOD_SAMPLES = 4
"""Consecutive gaps looked at to find an expression's period (the smallest one)."""


def zone(name: str) -> ZoneInfo:
    """The time zone called ``name`` (an IANA name such as ``"Europe/Berlin"`` or ``"UTC"``).

    Raises:
        ConfigError: no such zone in the system's or the ``tzdata`` package's database.
    """
    if not isinstance(name, str) or not name:
        raise ConfigError(f"time zone must be an IANA name such as 'Europe/Berlin', got {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"unknown time zone {name!r}") from None


@dataclass(frozen=True)
class Cron:
    """A parsed cron expression in a time zone.

    Args:
        expression: the text as written (5 or 6 fields, or a macro).
        tz: IANA time-zone name the fields are read in (default ``"UTC"``).

    Raises:
        ConfigError: the expression does not parse, never fires, or ``tz`` is unknown.
    """

    expression: str
    tz: str = "UTC"
    _fields: str = field(init=False, repr=False, compare=False)
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str) or not self.expression.strip():
            raise ConfigError(
                f"cron expression must be a non-empty string, got {self.expression!r}"
            )
        text = " ".join(self.expression.split())
        fields = MACROS.get(text.lower(), text)
        if fields.startswith("@"):
            raise ConfigError(
                f"unknown cron macro {text!r}; known: {', '.join(sorted(MACROS))}"
            )
        if len(fields.split()) not in (5, 6):
            raise ConfigError(
                f"cron expression {text!r} has {len(fields.split())} fields; expected 5 "
                "(minute hour day month weekday) or 6 (seconds first)"
            )
        object.__setattr__(self, "_zone", zone(self.tz))
        object.__setattr__(self, "_fields", fields)
        try:
            first = self.next_after(0)
        except CronSimError as exc:
            raise ConfigError(f"bad cron expression {text!r}: {exc}") from None
        if first is None:
            raise ConfigError(f"cron expression {text!r} never fires")

    @property
    def has_seconds(self) -> bool:
        """Whether the expression has a seconds field (6 fields)."""
        return len(self._fields.split()) == 6

    def _iterate(self, after: int) -> Iterator[int]:
        start = datetime.fromtimestamp(after, tz=timezone.utc).astimezone(self._zone)
        for when in CronSim(self._fields, start):
            yield int(when.timestamp())

    def next_after(self, after: float) -> int | None:
        """The first tick strictly after ``after`` (epoch seconds), or None if the expression
        fires no more (within cronsim's 50-year horizon).

        Raises:
            cronsim.CronSimError: only while the expression is being checked.
        """
        for tick in self.ticks_after(after):
            return tick
        return None

    def ticks_after(self, after: float) -> Iterator[int]:
        """Every tick strictly after ``after`` (epoch seconds), in order, without end.

        cronsim's Debian-cron DST rule computes on wall time, which can give, right after a
        fall-back change, a tick at or before ``after``; those are dropped, so the ticks are
        strictly increasing.
        """
        last = after
        for tick in self._iterate(math.floor(after)):
            if tick > last:
                last = tick
                yield tick

    def ticks_between(self, after: float, until: float) -> Iterator[int]:
        """Ticks ``t`` with ``after < t <= until`` (epoch seconds), in order."""
        for tick in self.ticks_after(after):
            if tick > until:
                return
            yield tick

    def period(self, around: float) -> int:
        """The smallest gap, in seconds, between consecutive ticks following ``around``
        (epoch seconds), over ``PERIOD_SAMPLES`` gaps: 60 for ``* * * * *``, 1 for a
        seconds field of ``*``. An expression that fires fewer times gives the gaps it has."""
        ticks = []
        for tick in self.ticks_after(around):
            ticks.append(tick)
            if len(ticks) > PERIOD_SAMPLES:
                break
        gaps = [b - a for a, b in itertools.pairwise(ticks)]
        return min(gaps) if gaps else 365 * 24 * 3600

    def local(self, tick: float) -> datetime:
        """``tick`` (epoch seconds) as an aware datetime in this expression's time zone."""
        return datetime.fromtimestamp(tick, tz=timezone.utc).astimezone(self._zone)

    def __str__(self) -> str:
        return f"{self.expression} ({self.tz})"
