"""Sentry Crons monitors built from periodic schedules (no Redis, no network)."""

from __future__ import annotations

import pytest

pytest.importorskip("sentry_sdk", reason="sentry-sdk is not installed")

from rfetch.integrations.sentry.crons import (
    MAX_SLUG_LENGTH,
    crontab_of,
    monitor_config,
    monitor_slug,
)
from rfetch.jobs.schedule import build_schedule


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("nightly-report", "nightly-report"),
        ("myapp.jobs.CleanupJob", "myapp-jobs-cleanupjob"),
        ("Weekly Digest!", "weekly-digest"),
        ("2024", "rfetch-2024"),
        ("___", "___"),
        ("...", "rfetch"),
    ],
)
def test_a_monitor_slug_is_a_sentry_slug_of_the_schedule_name(name: str, slug: str) -> None:
    assert monitor_slug(name) == slug


def test_long_names_keep_their_start_and_stay_distinct() -> None:
    first = monitor_slug("myapp.reports." + "a" * 80)
    second = monitor_slug("myapp.reports." + "a" * 79 + "b")
    assert first != second
    assert len(first) == len(second) == MAX_SLUG_LENGTH
    assert first.startswith("myapp-reports-aaa")


@pytest.mark.parametrize(
    ("expression", "crontab"),
    [
        ("*/5 * * * *", "*/5 * * * *"),
        ("  0   2 * * MON-FRI ", "0 2 * * MON-FRI"),
        ("@hourly", "0 * * * *"),
        ("@Daily", "0 0 * * *"),
        ("30 */5 * * * *", "*/5 * * * *"),  # a fixed second: at most once a minute
        ("*/10 * * * * *", None),  # more often than once a minute
        ("0,30 * * * * *", None),
    ],
)
def test_the_crontab_sentry_gets(expression: str, crontab: str | None) -> None:
    assert crontab_of(expression) == crontab


def test_the_monitor_config_has_the_schedule_s_crontab_and_time_zone() -> None:
    schedule = build_schedule("0 2 * * *", "Nightly", tz="Europe/Berlin", external=True)

    assert monitor_config(schedule, {"checkin_margin": 5}) == {
        "schedule": {"type": "crontab", "value": "0 2 * * *"},
        "timezone": "Europe/Berlin",
        "checkin_margin": 5,
    }
    assert monitor_config(build_schedule("*/10 * * * * *", "Fast", external=True)) is None
