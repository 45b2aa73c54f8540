"""Catch-up planning: which due ticks are pushed, which are skipped, when to look again."""

from __future__ import annotations

from rfetch.jobs.cron import Cron
from rfetch.periodic.catchup import plan_ticks

T0 = 1_780_000_000 - 1_780_000_000 % 3600  # a whole hour


def test_nothing_due_gives_the_next_tick() -> None:
    plan = plan_ticks(Cron("*/5 * * * *"), T0, T0 + 100, 300)
    assert plan.push == ()
    assert plan.skipped == 0
    assert plan.next_tick == T0 + 300
    assert plan.complete


def test_the_due_tick_is_pushed_and_the_next_one_named() -> None:
    plan = plan_ticks(Cron("*/5 * * * *"), T0, T0 + 300.2, 300)
    assert plan.push == (T0 + 300,)
    assert plan.next_tick == T0 + 600


def test_a_gap_within_the_window_is_caught_up_in_order() -> None:
    # Per-second schedule, cursor 20 s back, window 60 s: all 20 ticks, oldest first.
    plan = plan_ticks(Cron("* * * * * *"), T0, T0 + 20, 60)
    assert plan.push == tuple(range(T0 + 1, T0 + 21))
    assert plan.skipped == 0
    assert plan.next_tick == T0 + 21


def test_ticks_older_than_the_window_are_skipped_and_counted() -> None:
    # Per-minute schedule, cursor 10 minutes back, window 3 minutes.
    plan = plan_ticks(Cron("* * * * *"), T0, T0 + 600, 180)
    assert plan.skipped == 6  # T0+60 ... T0+360 are more than 180 s old
    assert plan.skipped_through == T0 + 360
    assert plan.push == (T0 + 420, T0 + 480, T0 + 540, T0 + 600)


def test_a_tick_exactly_window_old_is_still_pushed() -> None:
    plan = plan_ticks(Cron("* * * * *"), T0, T0 + 120, 60)
    assert plan.skipped == 0
    assert plan.push == (T0 + 60, T0 + 120)
    plan = plan_ticks(Cron("* * * * *"), T0, T0 + 120, 59.5)
    assert plan.skipped == 1
    assert plan.push == (T0 + 120,)


def test_push_limit_stops_the_plan_incomplete() -> None:
    plan = plan_ticks(Cron("* * * * * *"), T0, T0 + 50, 60, push_limit=10)
    assert plan.push == tuple(range(T0 + 1, T0 + 11))
    assert not plan.complete
    assert plan.next_tick is None
    rest = plan_ticks(Cron("* * * * * *"), plan.push[-1], T0 + 50, 60, push_limit=100)
    assert rest.push == tuple(range(T0 + 11, T0 + 51))
    assert rest.complete


def test_skip_limit_keeps_the_count_exact_over_several_plans() -> None:
    cron = Cron("* * * * * *")
    cursor, now, total = T0, T0 + 10_000, 0
    while True:
        plan = plan_ticks(cron, cursor, now, 100, skip_limit=3000)
        total += plan.skipped
        if plan.skipped_through is not None:
            cursor = plan.skipped_through
        if plan.complete:
            break
    assert total == 9899  # T0+1 .. T0+9899 are more than 100 s old
    assert plan.push == tuple(range(now - 100, now + 1))


def test_a_cursor_in_the_future_plans_nothing() -> None:
    plan = plan_ticks(Cron("* * * * *"), T0 + 3600, T0, 60)
    assert plan.push == ()
    assert plan.skipped == 0
    assert plan.next_tick == T0 + 3660
