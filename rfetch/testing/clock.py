"""The fake mode's clock: when scheduled jobs and retries become due."""

from __future__ import annotations

import datetime as dt
import math
import threading
import time

from rfetch.errors import ConfigError


class FakeClock:
    """The time of a fake mode, float epoch seconds: ``time.time()`` plus the seconds
    :meth:`advance` added, or, when ``start`` is given, frozen at ``start`` and moved only
    by :meth:`advance`.

    While a fake mode is active, every push reads this clock (``created_at``, the ``at`` of
    ``perform_in``), and ``drain`` runs a scheduled job or a retry only once this clock has
    reached its time. Following ``time.time()`` by default, it moves with freezegun and
    time-machine. Thread-safe.

    Args:
        start: None (follow ``time.time()``), or the frozen start time: epoch seconds or a
            datetime (naive: local time).

    Raises:
        ConfigError: ``start`` is not a datetime or finite epoch seconds.
    """

    def __init__(self, start: float | dt.datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._offset = 0.0
        self._frozen = None if start is None else _epoch(start)

    def now(self) -> float:
        """The fake time, float epoch seconds."""
        base = time.time() if self._frozen is None else self._frozen
        with self._lock:
            return base + self._offset

    def advance(self, seconds: float | dt.timedelta) -> float:
        """Move the clock forward by ``seconds`` (or a timedelta); the new time (epoch
        seconds). Nothing runs: ``drain`` then runs what became due.

        Raises:
            ConfigError: a negative, infinite or non-numeric interval (time does not go
                back).
        """
        value = seconds.total_seconds() if isinstance(seconds, dt.timedelta) else seconds
        if (
            not isinstance(value, (int, float)) or isinstance(value, bool)
            or not math.isfinite(value) or value < 0
        ):
            raise ConfigError(f"advance takes seconds >= 0 or a timedelta, got {seconds!r}")
        with self._lock:
            self._offset += float(value)
        return self.now()

    def advance_to(self, when: float) -> None:
        """Move the clock to ``when`` (epoch seconds) if it is not there yet."""
        with self._lock:
            base = time.time() if self._frozen is None else self._frozen
            self._offset = max(self._offset, when - base)


def _epoch(when: float | dt.datetime) -> float:
    if isinstance(when, dt.datetime):
        return when.timestamp()
    if isinstance(when, (int, float)) and not isinstance(when, bool) and math.isfinite(when):
        return float(when)
    raise ConfigError(f"a clock starts at a datetime or epoch seconds, got {when!r}")
