"""Job time limits and cancellation, the cooperative side: ``JobControl``, ``Job.deadline``,
``Job.check_cancelled`` and the ``timeout`` option (no Redis, a fake clock)."""

from __future__ import annotations

import pytest

import rfetch
from rfetch.jobs.job_control import JobControl, cancel_mark, read_cancel_mark, timeout_of
from rfetch.jobs.options import check_options
from rfetch.worker.retry import error_class_name


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Slow(rfetch.Job):
    timeout = 2.0

    def perform(self) -> None:
        self.check_cancelled()


def test_deadline_is_start_plus_timeout_and_check_raises_past_it() -> None:
    clock = Clock()
    control = JobControl(2.0, grace=1.0, clock=clock)
    assert control.deadline == 102.0
    control.check()  # before the deadline: go on
    clock.now = 102.0
    with pytest.raises(rfetch.JobTimeout, match="time limit of 2 s"):
        control.check()


def test_no_timeout_means_no_deadline_and_never_overdue() -> None:
    clock = Clock()
    control = JobControl(None, grace=1.0, clock=clock)
    clock.now = 10**9
    control.check()
    assert control.deadline is None
    assert control.overdue() is None
    assert control.next_due() is None


def test_overdue_only_after_the_grace_period() -> None:
    clock = Clock()
    control = JobControl(2.0, grace=3.0, clock=clock)
    assert control.overdue(104.9) is None
    assert control.overdue(105.0) == "timeout"
    assert control.next_due() == 105.0


def test_cancel_raises_cancelled_at_once_and_its_grace_starts_at_the_request() -> None:
    clock = Clock()
    control = JobControl(None, grace=2.0, clock=clock)
    clock.now = 150.0
    control.cancel("operator asked", dead=True)
    with pytest.raises(rfetch.JobCancelled, match="operator asked"):
        control.check()
    assert control.cancelled and control.cancel_to_dead
    assert control.overdue(151.9) is None
    assert control.overdue(152.0) == "cancel"
    clock.now = 151.0
    control.cancel("a second request")  # the first request's time and reason stand
    assert control.next_due() == 152.0
    assert control.cancel_reason == "operator asked"


def test_cancel_wins_over_timeout() -> None:
    clock = Clock()
    control = JobControl(1.0, grace=0.0, clock=clock)
    clock.now = 200.0
    control.cancel()
    assert control.overdue() == "cancel"
    assert isinstance(control.error("cancel"), rfetch.JobCancelled)


def test_error_class_is_the_public_name() -> None:
    assert error_class_name(rfetch.JobTimeout("x")) == "rfetch.JobTimeout"
    assert error_class_name(rfetch.JobCancelled("x")) == "rfetch.JobCancelled"


def test_job_sees_its_control() -> None:
    clock = Clock()
    job = Slow()
    assert job.deadline is None
    job.check_cancelled()  # outside a worker: never stops
    job.control = JobControl(Slow.timeout, grace=1.0, clock=clock)
    assert job.deadline == 102.0
    job.perform()
    clock.now = 103.0
    with pytest.raises(rfetch.JobTimeout):
        job.perform()


def test_timeout_option_travels_in_the_payload() -> None:
    client = rfetch.Client(rfetch.Config())  # builds payloads without connecting
    built = client.build(Slow.job_name(), [], Slow.default_options(), None)
    assert built["timeout"] == 2.0
    per_push = client.build(Slow.job_name(), [], {**Slow.default_options(), "timeout": 5}, None)
    assert per_push["timeout"] == 5
    assert "timeout" not in client.build("Plain", [], rfetch.Job.default_options(), None)


@pytest.mark.parametrize("bad", [0, -1, "5", True, float("inf"), float("nan")])
def test_a_bad_timeout_is_refused(bad: object) -> None:
    with pytest.raises(rfetch.ConfigError, match="timeout"):
        check_options({"timeout": bad})
    with pytest.raises(rfetch.ConfigError, match="timeout"):
        type("BadTimeout", (rfetch.Job,), {"timeout": bad})


def test_timeout_of_reads_the_payload_else_the_default() -> None:
    assert timeout_of({"timeout": 3}, None) == 3.0
    assert timeout_of({}, 7.0) == 7.0
    for bad in ("3", -1, 0, True, None, float("nan")):
        assert timeout_of({"timeout": bad}, 7.0) == 7.0


def test_config_checks_the_limits() -> None:
    for field, value in (
        ("processes", 0),
        ("max_memory", 0),
        ("max_jobs", -1),
        ("job_timeout", 0.0),
        ("job_timeout_grace", -1.0),
    ):
        with pytest.raises(rfetch.ConfigError, match=field):
            rfetch.Config(**{field: value})
    config = rfetch.Config.from_env(
        {"RFETCH_PROCESSES": "3", "RFETCH_JOB_TIMEOUT": "2.5", "RFETCH_MAX_MEMORY": "300"}
    )
    assert (config.processes, config.job_timeout, config.max_memory) == (3, 2.5, 300)


def test_finish_and_abandon_exclude_each_other() -> None:
    late = JobControl(1.0, grace=0.0, clock=Clock())
    assert late.abandon() and late.abandoned
    assert not late.finish()  # the thread's late result is ignored
    early = JobControl(1.0, grace=0.0, clock=Clock())
    assert early.finish()
    assert not early.abandon() and not early.abandoned  # the job finished first: no hard path


def test_cancel_marks_round_trip_and_garbage_still_cancels() -> None:
    assert read_cancel_mark(cancel_mark("stop it", True, 1.5)) == ("stop it", True)
    assert read_cancel_mark(b'{"reason": 3}') == ("", False)
    assert read_cancel_mark(b"yes") == ("", False)
    assert read_cancel_mark(b"[1]") == ("", False)
