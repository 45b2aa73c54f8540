"""Checks of limiter evidence written by jobs outside Redis (``tests/jobs/limiter_jobs.py``),
timestamps from the host's one clock (``time.time()`` in every process; Redis's ``TIME`` on
the same host reads the same clock)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass


@dataclass(frozen=True)
class WindowReport:
    """Calls per aligned window.

    Attributes:
        definite: window start (int seconds / period) -> calls whose whole [asked, in]
            interval lies in that window: the grant certainly happened in it.
        straddling: calls whose interval crosses a window boundary (their window is not
            known from outside Redis; counted in neither).
    """

    definite: Counter[int]
    straddling: int

    def worst(self) -> int:
        return max(self.definite.values(), default=0)


def window_counts(calls: list[tuple[float, float]], period: float = 1.0) -> WindowReport:
    """``calls``: (asked, in) time pairs of granted calls."""
    definite: Counter[int] = Counter()
    straddling = 0
    for asked, entered in calls:
        first, last = math.floor(asked / period), math.floor(entered / period)
        if first == last:
            definite[first] += 1
        else:
            straddling += 1
    return WindowReport(definite, straddling)


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end at t comes before a start at t)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals],
                    key=lambda x: (x[0], x[1]))
    open_now = best = 0
    for _, step in events:
        open_now += step
        best = max(best, open_now)
    return best
