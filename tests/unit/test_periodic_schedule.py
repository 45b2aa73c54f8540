"""Registering periodic schedules: checks, names, options, the catch-up window."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

import rfetch
from rfetch.errors import ConfigError
from rfetch.jobs.schedule import MAX_CATCH_UP, PeriodicRegistry


class Cleanup(rfetch.Job):
    queue = "maintenance"
    retry = 2

    def perform(self, *args: Any) -> None:
        pass


class Report(rfetch.Job):
    name = "Report"

    def perform(self, kind: str) -> None:
        pass


@rfetch.job(queue="sync")
def sync_all() -> None:
    pass


def test_register_takes_the_class_defaults_and_the_overrides() -> None:
    registry = PeriodicRegistry()
    schedule = registry.register(
        "0 2 * * *", Report, args=["daily"], tz="Europe/Berlin", queue="reports", retry=3,
        name="nightly-report",
    )
    assert schedule.name == "nightly-report"
    assert schedule.job_name == "Report"
    assert schedule.args == ("daily",)
    assert schedule.queue == "reports"
    assert schedule.options["retry"] == 3
    assert schedule.cron.tz == "Europe/Berlin"
    assert registry.get("nightly-report") is schedule


def test_default_name_is_the_job_name_and_queue_the_class_queue() -> None:
    registry = PeriodicRegistry()
    schedule = registry.register("*/5 * * * *", Cleanup)
    assert schedule.name == f"{__name__}.Cleanup"
    assert schedule.queue == "maintenance"
    assert schedule.options["retry"] == 2
    assert schedule.args == ()


def test_job_functions_and_names_are_accepted() -> None:
    registry = PeriodicRegistry()
    by_function = registry.register("@hourly", sync_all)
    assert by_function.job_name == f"{__name__}.sync_all"
    assert by_function.queue == "sync"
    by_name = registry.register("@daily", "Report", name="by-name")
    assert by_name.job_name == "Report"
    assert by_name.queue == "default"


def test_a_name_registered_twice_raises_and_keeps_the_first() -> None:
    registry = PeriodicRegistry()
    first = registry.register("*/5 * * * *", Cleanup)
    with pytest.raises(ConfigError, match="registered twice"):
        registry.register("0 * * * *", Cleanup)
    assert list(registry) == [first]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"cron": "61 * * * *"}, "periodic schedule 'bad': bad cron expression"),
        ({"tz": "Nowhere/City"}, "periodic schedule 'bad': unknown time zone"),
        ({"args": [dt.datetime(2026, 1, 1)]}, r"periodic schedule 'bad': args\[0\] is a datetime"),
        ({"args": "x"}, "periodic schedule 'bad': args must be a list"),
        ({"catch_up": 0}, "periodic schedule 'bad': catch_up must be"),
        ({"catch_up": float("inf")}, "periodic schedule 'bad': catch_up must be"),
        ({"retry": "often"}, "periodic schedule 'bad': retry must be"),
        ({"colour": "red"}, "periodic schedule 'bad': unknown job option"),
        ({"key": "k"}, "periodic schedule 'bad': option"),
        ({"unique_for": 10}, "periodic schedule 'bad': option"),
    ],
)
def test_bad_registrations_name_the_schedule_and_keep_nothing(
    kwargs: dict[str, Any], words: str
) -> None:
    registry = PeriodicRegistry()
    cron = kwargs.pop("cron", "*/5 * * * *")
    with pytest.raises(ConfigError, match=words):
        registry.register(cron, Cleanup, name="bad", **kwargs)
    assert len(registry) == 0


def test_a_bad_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="'has space'"):
        PeriodicRegistry().register("@daily", Cleanup, name="has space")


def test_a_non_job_is_refused() -> None:
    with pytest.raises(ConfigError, match="is not a job"):
        PeriodicRegistry().register("@daily", object)


def test_check_jobs_names_the_schedule_with_an_unknown_job() -> None:
    registry = PeriodicRegistry()
    registry.register("@daily", Cleanup)
    registry.register("@daily", "NotLoaded", name="ghost")
    registry.check_jobs([f"{__name__}.Cleanup", "NotLoaded"])
    with pytest.raises(ConfigError, match="periodic schedule 'ghost': job 'NotLoaded'"):
        registry.check_jobs([f"{__name__}.Cleanup"])


def test_check_jobs_accepts_an_external_job_name() -> None:
    registry = PeriodicRegistry()
    schedule = registry.register("@daily", "RubyOnlyWorker", queue="ruby", external=True)
    registry.check_jobs([])
    assert schedule.external
    assert schedule.job_name == "RubyOnlyWorker"


def test_external_takes_a_name_not_a_class() -> None:
    with pytest.raises(ConfigError, match="external=True takes the job's name"):
        PeriodicRegistry().register("@daily", Cleanup, external=True)


def test_collect_registers_classes_with_a_cron_attribute() -> None:
    class Nightly(rfetch.Job):
        cron = "30 2 * * *"
        cron_tz = "Europe/Berlin"

        def perform(self) -> None:
            pass

    class Hourly(rfetch.Job):
        cron = "@hourly"

        def perform(self) -> None:
            pass

    registry = PeriodicRegistry()
    registry.register("@daily", Hourly, name=Hourly.job_name(), queue="kept")
    registry.collect([Cleanup, Hourly, Nightly])
    assert sorted(s.name for s in registry) == sorted([Hourly.job_name(), Nightly.job_name()])
    nightly = registry.get(Nightly.job_name())
    assert nightly is not None and nightly.cron.tz == "Europe/Berlin"
    hourly = registry.get(Hourly.job_name())
    assert hourly is not None and hourly.queue == "kept"  # registered by hand first


def test_collect_names_a_bad_cron_attribute() -> None:
    class Broken(rfetch.Job):
        cron = "every day"

        def perform(self) -> None:
            pass

    with pytest.raises(ConfigError, match="Broken"):
        PeriodicRegistry().collect([Broken])


def test_default_window_is_one_period_within_bounds() -> None:
    registry = PeriodicRegistry()
    now = 1_780_000_000.0
    every_second = registry.register("* * * * * *", Cleanup, name="s")
    every_ten_minutes = registry.register("*/10 * * * *", Cleanup, name="m")
    daily = registry.register("@daily", Cleanup, name="d")
    explicit = registry.register("@daily", Cleanup, name="e", catch_up=86400)
    assert every_second.window(15, now) == 60  # 4 leader TTLs
    assert every_ten_minutes.window(15, now) == 600
    assert daily.window(15, now) == MAX_CATCH_UP
    assert explicit.window(15, now) == 86400


def test_fingerprint_follows_expression_and_zone_only() -> None:
    registry = PeriodicRegistry()
    a = registry.register("0 2 * * *", Cleanup, name="a")
    b = registry.register("0  2 * * *", Cleanup, name="b", args=[1], queue="other")
    c = registry.register("0 2 * * *", Cleanup, name="c", tz="Europe/Berlin")
    d = registry.register("0 3 * * *", Cleanup, name="d")
    assert a.fingerprint == b.fingerprint
    assert len({a.fingerprint, c.fingerprint, d.fingerprint}) == 3


def test_definition_is_json_for_the_api() -> None:
    registry = PeriodicRegistry()
    schedule = registry.register("0 2 * * *", Report, args=["daily"], name="nightly")
    data = json.loads(schedule.definition_json(3600))
    assert data == {
        "name": "nightly", "cron": "0 2 * * *", "tz": "UTC", "class": "Report",
        "args": ["daily"], "queue": "default", "options": {"retry": True, "queue": "default"},
        "catch_up": 3600, "fingerprint": schedule.fingerprint,
    }


def test_the_decorator_form_carries_cron_to_collect() -> None:
    @rfetch.job(cron="0 * * * *", cron_tz="Europe/Berlin", queue="sync")
    def hourly() -> None:
        pass

    registry = PeriodicRegistry()
    registry.collect([hourly.job_class])
    schedule = registry.get(hourly.job_class.job_name())
    assert schedule is not None
    assert schedule.cron.expression == "0 * * * *"
    assert schedule.cron.tz == "Europe/Berlin"
    assert schedule.queue == "sync"


def test_leader_ttl_is_read_from_the_environment_and_checked() -> None:
    from rfetch.config import Config

    assert Config().leader_ttl == 15.0
    assert Config.from_env({"RFETCH_LEADER_TTL": "6.5"}).leader_ttl == 6.5
    with pytest.raises(ConfigError, match="RFETCH_LEADER_TTL"):
        Config.from_env({"RFETCH_LEADER_TTL": "soon"})
    with pytest.raises(ConfigError, match="leader_ttl must be at least 1 second"):
        Config(leader_ttl=0.5)
