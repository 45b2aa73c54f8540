"""Fake mode runs retries and schedules by a clock the test controls, and asserts on what
is waiting: ``drain(retries=True)``, ``FakeClock`` / ``advance``, time-machine, and
``assert_enqueued``."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any
from unittest.mock import ANY

import pytest

import rfetch
from rfetch import testing
from rfetch.config import Config

START = 1_800_000_000.0  # a frozen clock's start, epoch seconds
events: list[tuple[str, Any]] = []


class Flaky(rfetch.Job):
    """Fails until its third run; retried after 10 s each time."""

    runs = 0

    def perform(self, item: int) -> None:
        Flaky.runs += 1
        events.append(("flaky", testing.current().now()))
        if Flaky.runs < 3:
            raise ConnectionError(f"try {Flaky.runs}")

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        return 10.0


class Doomed(rfetch.Job):
    retry = 2

    def perform(self, item: int) -> None:
        raise ValueError("never")

    def retries_exhausted(self, job: dict[str, Any], exc: BaseException) -> None:
        events.append(("exhausted", job["retry_count"]))


class Quiet(rfetch.Job):
    retry = False

    def perform(self) -> None:
        raise ValueError("dropped")


class Reminder(rfetch.Job):
    queue = "reminders"

    def perform(self, user_id: int) -> None:
        events.append(("reminder", user_id))


@pytest.fixture(autouse=True)
def _clean() -> None:
    events.clear()
    Flaky.runs = 0


def test_drain_with_retries_retries_as_a_worker_until_success() -> None:
    with testing.fake(clock=testing.FakeClock(START)) as queues:
        Flaky.perform_async(1)
        assert queues.drain(retries=True) == 3
        assert [now for _, now in events] == [START, START + 10, START + 20]
        assert queues.jobs() == [] and queues.dead() == []


def test_retries_run_out_into_the_dead_set_with_the_hooks() -> None:
    died: list[str] = []
    config = Config(death_handlers=[lambda job, exc: died.append(job["jid"])])
    with testing.fake(config, clock=testing.FakeClock(START)) as queues:
        jid = Doomed.perform_async(1)
        Quiet.perform_async()
        assert queues.drain(retries=True) == 4  # Doomed: 1 run + 2 retries; Quiet: 1
        [dead] = queues.dead(Doomed)
        assert (dead["jid"], dead["retry_count"], dead["error_class"]) == (jid, 2, "ValueError")
        assert dead["error_message"] == "never"
        assert events == [("exhausted", 2)]
        assert jid in died and len(died) == 2  # Quiet (retry: false) is dropped, not dead
        assert queues.dead(Quiet) == [] and len(queues) == 0


def test_default_backoff_is_sidekiqs_formula() -> None:
    # The jitter fixed by the rng given; the queues as a client's own sink.
    queues = testing.FakeQueues(Config(), testing.FakeClock(START), random.Random(7))
    Doomed.set(client=rfetch.Client(Config(), sink=queues)).perform_async(1)
    assert queues.drain(retries=True, scheduled=False) == 1
    [retry] = queues.jobs(Doomed)
    jitter = random.Random(7).randrange(10)
    assert retry["at"] == START + 0**4 + 15 + jitter * 1
    assert retry["retry_count"] == 0 and retry["error_class"] == "ValueError"


def test_without_retries_drain_still_raises() -> None:
    with testing.fake() as queues:
        Flaky.perform_async(1)
        with pytest.raises(ConnectionError, match="try 1"):
            queues.drain()
        assert len(queues) == 0


def test_scheduled_jobs_wait_for_the_clock() -> None:
    with testing.fake(clock=testing.FakeClock(START)) as queues:
        Reminder.perform_in(3600, 1)
        Reminder.perform_at(START + 60, 2)
        Reminder.perform_async(3)
        assert queues.jobs(Reminder)[0]["at"] == START + 3600  # the frozen clock's time
        assert queues.drain(scheduled=False) == 1
        assert queues.advance(59) == START + 59
        assert testing.drain(scheduled=False) == 0
        testing.advance(dt.timedelta(seconds=1))
        assert queues.drain(scheduled=False) == 1
        assert queues.drain() == 1  # scheduled=True: the clock jumps to the last one
        assert queues.now() == START + 3600
    assert events == [("reminder", 3), ("reminder", 2), ("reminder", 1)]


def test_the_default_clock_follows_time_machine() -> None:
    time_machine = pytest.importorskip("time_machine")
    with time_machine.travel(START, tick=False) as traveller, testing.fake() as queues:
        Reminder.perform_in(3600, 1)
        assert queues.drain(scheduled=False) == 0
        traveller.shift(3600)
        assert queues.drain(scheduled=False) == 1


def test_the_clock_refuses_to_go_back() -> None:
    with pytest.raises(rfetch.ConfigError, match="advance"):
        testing.FakeClock().advance(-1)


def test_assert_enqueued_matches_and_explains() -> None:
    with testing.fake(clock=testing.FakeClock(START)) as queues:
        Reminder.perform_async(1)
        Reminder.perform_in(600, 2)
        assert testing.assert_enqueued(Reminder, args=[1], queue="reminders", delay=0)
        testing.assert_enqueued(Reminder, args=[ANY], count=2)
        queues.assert_enqueued(Reminder, args=[2], delay=dt.timedelta(minutes=10))
        queues.assert_enqueued(Reminder, at=dt.datetime.fromtimestamp(START + 600, dt.timezone.utc))
        testing.assert_not_enqueued(Reminder, args=[3])
        with pytest.raises(AssertionError, match=r"args=\[2\] queue='reminders' at=") as err:
            testing.assert_enqueued(Reminder, args=[2], queue="mail")
        assert "expected at least one" in str(err.value) and "found 0" in str(err.value)
        with pytest.raises(AssertionError, match="expected 0"):
            queues.assert_not_enqueued(Reminder, args=[1])
        with pytest.raises(AssertionError, match="expected 3"):
            queues.assert_enqueued(Reminder, count=3)


def test_assertions_outside_fake_mode_say_so() -> None:
    with pytest.raises(RuntimeError, match="fake mode"):
        testing.assert_enqueued(Reminder)
