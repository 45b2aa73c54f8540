"""The timekeeper's hard path when recording the failure itself raises inside rfetch: the job
takes the bounded path (pushed back counted, or buried) and the process still retires."""

from __future__ import annotations

from typing import Any

from rfetch.worker.timekeeper import Timekeeper
from tests.support.worker_context import fake_context
from tests.unit.test_timekeeper import FakeRetry, Setup


class BrokenRetry(FakeRetry):
    def fail(self, unit: Any, job: dict[str, Any], instance: Any, exc: BaseException) -> str:
        raise ValueError("recording the failure raised")

    def rfetch_failed(self, unit: Any, exc: BaseException) -> str:
        self.calls.append(("rfetch_failed", "", exc))
        return "requeued"


def test_an_overdue_job_whose_failure_cannot_be_recorded_takes_the_bounded_path() -> None:
    s = Setup()
    s.retry = BrokenRetry()
    s.keeper = Timekeeper(
        fake_context(s.redis, s.work),
        s.retry,  # type: ignore[arg-type]
        retire=s.retired.append,
        clock=s.clock,
    )
    s.run_job(1, "a" * 24, timeout=2.0)
    s.clock.now += 3.0
    s.keeper.check()
    [(kind, _, exc)] = s.retry.calls
    assert kind == "rfetch_failed" and str(exc) == "recording the failure raised"
    assert s.retired == [f"job {'a' * 24} (app.Slow) overran its time limit"]
