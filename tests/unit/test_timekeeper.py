"""The timekeeper's decisions with a fake clock, fake Redis replies and a recording
JobRetry: cancel marks set the flag, an overdue job takes the hard path exactly once, a job
that finished first does not, and a Redis outage is survived."""

from __future__ import annotations

from typing import Any

import pytest

import rfetch
from rfetch.jobs.job_control import JobControl, cancel_mark
from rfetch.worker.timekeeper import Timekeeper
from rfetch.worker.work_state import Execution, WorkState
from tests.support.worker_context import fake_context


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeRedis:
    def __init__(self) -> None:
        self.marks: dict[str, bytes] = {}
        self.down = False
        self.calls = 0

    def mget(self, keys: list[str]) -> list[bytes | None]:
        self.calls += 1
        if self.down:
            raise ConnectionError("down")
        return [self.marks.get(k) for k in keys]


class FakeRetry:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, BaseException]] = []

    def fail(self, unit: Any, job: dict[str, Any], instance: Any, exc: BaseException) -> str:
        self.calls.append(("fail", job["jid"], exc))
        return "retry"

    def cancel(self, unit: Any, job: dict[str, Any], exc: BaseException, dead: bool) -> str:
        self.calls.append(("cancel" + (" dead" if dead else ""), job["jid"], exc))
        return "dead" if dead else "discarded"


class Unit:
    queue = "default"


class Setup:
    def __init__(self) -> None:
        self.clock = Clock()
        self.redis = FakeRedis()
        self.work = WorkState()
        self.retry = FakeRetry()
        self.retired: list[str] = []
        self.keeper = Timekeeper(
            fake_context(self.redis, self.work),
            self.retry,  # type: ignore[arg-type]
            retire=self.retired.append,
            clock=self.clock,
        )

    def run_job(self, thread_id: int, jid: str, timeout: float | None) -> JobControl:
        control = JobControl(timeout, grace=1.0, clock=self.clock)
        self.work.begin(thread_id, Unit())  # type: ignore[arg-type]
        payload = {"class": "app.Slow", "jid": jid, "args": []}
        self.work.watch(thread_id, Execution(Unit(), payload, rfetch.Job(), control))  # type: ignore[arg-type]
        return control


def test_an_overdue_job_is_recorded_once_and_the_process_retires() -> None:
    s = Setup()
    control = s.run_job(1, "a" * 24, timeout=2.0)
    s.clock.now += 2.9
    s.keeper.check()
    assert s.retry.calls == [] and s.work.busy() == 1
    s.clock.now += 0.1
    s.keeper.check()
    s.keeper.check()
    assert [(kind, jid) for kind, jid, _ in s.retry.calls] == [("fail", "a" * 24)]
    assert isinstance(s.retry.calls[0][2], rfetch.JobTimeout)
    assert control.abandoned and s.work.busy() == 0 and s.work.executions() == {}
    assert s.retired == [f"job {'a' * 24} (app.Slow) overran its time limit"]
    assert not control.finish()  # the thread's late end is ignored


def test_a_job_that_finished_first_is_left_alone() -> None:
    s = Setup()
    control = s.run_job(1, "b" * 24, timeout=1.0)
    s.clock.now += 5
    assert control.finish()
    s.keeper.check()
    assert s.retry.calls == [] and s.retired == []


def test_cancel_marks_set_the_flag_then_the_hard_path_follows_the_grace() -> None:
    s = Setup()
    control = s.run_job(1, "c" * 24, timeout=None)
    s.keeper.check()
    assert not control.cancelled
    s.redis.marks["cancel:" + "c" * 24] = cancel_mark("operator", True, 0.0).encode()
    s.keeper.check()
    assert control.cancelled and control.cancel_to_dead and control.cancel_reason == "operator"
    with pytest.raises(rfetch.JobCancelled, match="operator"):
        control.check()
    calls = s.redis.calls
    s.keeper.check()
    assert s.redis.calls == calls  # a cancelled job's mark is not read again
    s.clock.now += 1.0
    s.keeper.check()
    assert [(kind, jid) for kind, jid, _ in s.retry.calls] == [("cancel dead", "c" * 24)]
    assert s.retired == [f"job {'c' * 24} (app.Slow) ignored its cancel"]


def test_no_running_job_means_no_redis_call_and_an_outage_is_survived() -> None:
    s = Setup()
    s.keeper.check()
    assert s.redis.calls == 0
    s.run_job(1, "d" * 24, timeout=1.0)
    s.redis.down = True
    s.keeper.check()  # logged, not raised
    s.clock.now += 2.0
    s.keeper.check()  # the deadline still applies while Redis is down
    assert [kind for kind, _, _ in s.retry.calls] == ["fail"]


def test_next_wait_follows_the_nearest_hard_deadline() -> None:
    s = Setup()
    assert s.keeper.next_wait() == 1.0
    s.run_job(1, "e" * 24, timeout=0.2)
    assert s.keeper.next_wait() == 1.0  # due in 1.2 s: the usual look comes first
    s.clock.now += 0.9
    assert s.keeper.next_wait() == pytest.approx(0.3)
