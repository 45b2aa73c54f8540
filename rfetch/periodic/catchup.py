"""Which ticks a leader pushes now, which it skips, and when it looks again.

A schedule's cursor is the last tick dealt with (pushed, skipped or passed while paused),
kept in Redis so that a new leader goes on where the old one stopped. Every tick after the
cursor that is due (at or before Redis's clock) is pushed in order if it is at most the
catch-up window old; older ones are skipped and counted, never silently (Sidekiq
Enterprise does not catch up: a tick that falls due while no process leads is lost).
"""

from __future__ import annotations

from dataclasses import dataclass

from rfetch.jobs.cron import Cron

PUSH_LIMIT = 1000
"""Ticks one plan pushes at most; a longer catch-up continues in the next plan."""

SKIP_LIMIT = 1_000_000
"""Ticks one plan counts as skipped at most (about a second of cronsim's time for a
per-second schedule); the count goes on in the next plan, so it stays exact."""


@dataclass(frozen=True)
class TickPlan:
    """What to do for one schedule now.

    Attributes:
        push: due ticks within the window, oldest first (epoch seconds).
        skipped: how many due ticks are older than the window.
        skipped_through: the newest skipped tick, or None when none is skipped.
        next_tick: the first tick after ``now``, or None when the plan stopped at a limit
            (plan again at once) or the expression fires no more.
        complete: False when a limit stopped the plan before ``now``.
    """

    push: tuple[int, ...]
    skipped: int
    skipped_through: int | None
    next_tick: int | None
    complete: bool


def plan_ticks(
    cron: Cron,
    cursor: float,
    now: float,
    window: float,
    *,
    push_limit: int = PUSH_LIMIT,
    skip_limit: int = SKIP_LIMIT,
) -> TickPlan:
    """Plan the ticks of ``cron`` after ``cursor`` up to ``now``.

    Args:
        cron: the schedule's expression.
        cursor: the last tick dealt with (epoch seconds); only later ticks are planned.
        now: the present by Redis's clock (epoch seconds).
        window: catch-up window, seconds: a tick ``t`` with ``now - t > window`` is skipped.
        push_limit: most ticks to push in this plan.
        skip_limit: most ticks to count as skipped in this plan.
    """
    push: list[int] = []
    skipped = 0
    skipped_through: int | None = None
    for tick in cron.ticks_after(cursor):
        if tick > now:
            return TickPlan(tuple(push), skipped, skipped_through, tick, True)
        if now - tick > window:
            skipped += 1
            skipped_through = tick
            if skipped >= skip_limit:
                break
        else:
            push.append(tick)
            if len(push) >= push_limit:
                break
    else:
        return TickPlan(tuple(push), skipped, skipped_through, None, True)
    return TickPlan(tuple(push), skipped, skipped_through, None, False)
