"""Cron expressions: fields, macros, seconds, time zones and daylight saving time."""

from __future__ import annotations

import itertools
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from rfetch.errors import ConfigError
from rfetch.jobs.cron import Cron

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def epoch(*fields: int, tz: ZoneInfo | timezone = UTC, fold: int = 0) -> int:
    return int(datetime(*fields, tzinfo=tz, fold=fold).timestamp())  # type: ignore[misc]


def local(cron: Cron, tick: int) -> str:
    return cron.local(tick).strftime("%Y-%m-%d %H:%M:%S %Z")


def test_five_fields_give_ticks_strictly_after() -> None:
    cron = Cron("*/15 * * * *")
    start = epoch(2026, 1, 1, 10, 0)
    ticks = list(itertools.islice(cron.ticks_after(start), 3))
    assert ticks == [start + 900, start + 1800, start + 2700]


def test_a_tick_exactly_at_the_cursor_is_not_after_it() -> None:
    cron = Cron("0 * * * *")
    assert cron.next_after(epoch(2026, 1, 1, 10, 0)) == epoch(2026, 1, 1, 11, 0)
    assert cron.next_after(epoch(2026, 1, 1, 10, 0) - 0.5) == epoch(2026, 1, 1, 10, 0)


def test_seconds_field_comes_first() -> None:
    cron = Cron("*/10 * * * * *")
    start = epoch(2026, 1, 1, 0, 0)
    assert list(itertools.islice(cron.ticks_after(start), 3)) == [
        start + 10, start + 20, start + 30,
    ]
    assert cron.has_seconds
    assert not Cron("* * * * *").has_seconds


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@hourly", "0 * * * *"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@weekly", "0 0 * * 0"),
        ("@monthly", "0 0 1 * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@ANNUALLY", "0 0 1 1 *"),
    ],
)
def test_macros_equal_their_fields(macro: str, fields: str) -> None:
    start = epoch(2026, 5, 17, 13, 7)
    a, b = Cron(macro), Cron(fields)
    assert list(itertools.islice(a.ticks_after(start), 4)) == list(
        itertools.islice(b.ticks_after(start), 4)
    )


def test_names_of_days_and_months() -> None:
    cron = Cron("30 9 * JAN MON")
    tick = cron.next_after(epoch(2026, 1, 1))
    assert tick is not None
    assert local(cron, tick) == "2026-01-05 09:30:00 UTC"  # the first Monday of 2026


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("* * * *", "4 fields"),
        ("* * * * * * *", "7 fields"),
        ("61 * * * *", "bad cron expression"),
        ("* 25 * * *", "bad cron expression"),
        ("*/0 * * * *", "bad cron expression"),
        ("@fortnightly", "unknown cron macro"),
        ("", "non-empty"),
        ("0 0 30 2 *", "Bad day-of-month"),
    ],
)
def test_bad_expressions_raise_config_error(expression: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        Cron(expression)


def test_unknown_time_zone_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown time zone 'Mars/Olympus'"):
        Cron("0 2 * * *", "Mars/Olympus")


def test_time_zone_reads_fields_in_local_time() -> None:
    cron = Cron("0 9 * * *", "America/New_York")
    tick = cron.next_after(epoch(2026, 1, 10))
    assert tick == epoch(2026, 1, 10, 14, 0)  # 09:00 EST is 14:00 UTC


def daily_0230_ticks(tz: str, day_before: datetime) -> list[str]:
    cron = Cron("30 2 * * *", tz)
    ticks = itertools.islice(cron.ticks_after(day_before.timestamp()), 3)
    return [local(cron, t) for t in ticks]


def test_spring_forward_runs_a_missing_time_once_after_the_gap() -> None:
    # Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
    assert daily_0230_ticks("Europe/Berlin", datetime(2026, 3, 28, 12, tzinfo=BERLIN)) == [
        "2026-03-29 03:00:00 CEST",
        "2026-03-30 02:30:00 CEST",
        "2026-03-31 02:30:00 CEST",
    ]


def test_fall_back_runs_a_repeated_time_once() -> None:
    # Europe/Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    assert daily_0230_ticks("Europe/Berlin", datetime(2026, 10, 24, 12, tzinfo=BERLIN)) == [
        "2026-10-25 02:30:00 CEST",
        "2026-10-26 02:30:00 CET",
        "2026-10-27 02:30:00 CET",
    ]


def test_fall_back_from_inside_the_repeated_hour_does_not_go_back() -> None:
    # A cursor at the second 02:30 (CET): the next 02:45 is the next day's, never the first
    # 02:45 (CEST), which lies before the cursor.
    cron = Cron("45 2 * * *", "Europe/Berlin")
    second_0230 = epoch(2026, 10, 25, 2, 30, tz=BERLIN, fold=1)
    tick = cron.next_after(second_0230)
    assert tick is not None
    assert local(cron, tick) == "2026-10-26 02:45:00 CET"


def test_intervals_keep_elapsed_time_through_dst() -> None:
    cron = Cron("*/20 * * * *", "America/New_York")
    # 2026-11-01 01:00 EDT -> 01:00 EST: every 20 minutes of real time, 8 ticks in 2h40.
    start = epoch(2026, 11, 1, 0, 50, tz=NEW_YORK)
    ticks = list(itertools.islice(cron.ticks_after(start), 8))
    assert [b - a for a, b in itertools.pairwise(ticks)] == [1200] * 7


def test_period_is_the_smallest_gap() -> None:
    start = epoch(2026, 1, 1)
    assert Cron("* * * * * *").period(start) == 1
    assert Cron("*/5 * * * *").period(start) == 300
    assert Cron("0 9,17 * * *").period(start) == 8 * 3600
    assert Cron("@daily").period(start) == 86400
