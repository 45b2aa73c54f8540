"""The server steps around ``perform``, with recording steps and a processor on fakes: the
hooks run in the list's order, a step's outcome before the start ends the job (nothing of
it runs, the processor writes nothing), the first wrapping step is the outermost, a claimed
failure is never retried, and the built-in list keeps the user's middleware innermost."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import rfetch
from rfetch.config import Config
from rfetch.jobs.job import Job
from rfetch.jobs.payload import Routing
from rfetch.worker.job_run import JobRun
from rfetch.worker.processor import Processor
from rfetch.worker.registry import Registry
from rfetch.worker.server_steps import server_steps
from rfetch.worker.steps import AsyncPerform, Perform, Step, Steps
from rfetch.worker.unit import UnitOfWork
from tests.support.worker_context import fake_context

SEEN: list[str] = []


class Recorded(rfetch.Job):
    queue = "default"

    def perform(self, *args: Any) -> None:
        SEEN.append(f"perform {list(args)}")
        if args and args[0] == "fail":
            raise RuntimeError("failing")


class Recording(Step):
    """Records each hook it is called for; ends the job at ``end_before`` or claims a
    failure with ``claims``."""

    def __init__(self, name: str, end_before: str | None = None,
                 claims: str | None = None) -> None:
        self.name = name
        self.end_before = end_before
        self.claims = claims

    def applies(self, run: JobRun) -> bool:
        return True

    def before(self, run: JobRun) -> str | None:
        SEEN.append(f"{self.name} before")
        return self.end_before

    def begin(self, run: JobRun, instance: Job) -> None:
        SEEN.append(f"{self.name} begin")

    def wrap(self, run: JobRun, instance: Job, perform: Perform) -> None:
        SEEN.append(f"{self.name} in")
        perform()
        SEEN.append(f"{self.name} out")

    async def awrap(self, run: JobRun, instance: Job, perform: AsyncPerform) -> None:
        SEEN.append(f"{self.name} ain")
        await perform()
        SEEN.append(f"{self.name} aout")

    def after(self, run: JobRun) -> None:
        SEEN.append(f"{self.name} after")

    def claim(self, run: JobRun, exc: BaseException) -> str | None:
        SEEN.append(f"{self.name} claim")
        return self.claims

    def leaving(self, run: JobRun, outcome: str) -> None:
        SEEN.append(f"{self.name} leaving {outcome}")


class BeginOnly(Step):
    name = "begin-only"

    def begin(self, run: JobRun, instance: Job) -> None:
        SEEN.append("begin-only begin")


class FakeRetry:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def fail(self, unit: Any, job: dict[str, Any], instance: Any, exc: BaseException) -> str:
        self.failed.append(job["jid"])
        return "retry"


def unit(*args: Any) -> UnitOfWork:
    name = Registry([Recorded]).names()[0]
    raw = json.dumps({"class": name, "jid": "a" * 24, "args": list(args),
                      "queue": "default"}).encode()
    return UnitOfWork("default", raw, "private", Routing.parse(raw), cast("Any", None))


def processor(steps: list[Step]) -> tuple[Processor, list[UnitOfWork], FakeRetry]:
    SEEN.clear()
    acked: list[UnitOfWork] = []
    retry = FakeRetry()
    made = Processor(fake_context(None), Registry([Recorded]), cast("Any", retry),
                     Steps(steps), acked.append)
    return made, acked, retry


def test_each_hook_runs_in_the_list_order_and_the_first_wrap_is_outermost() -> None:
    run, acked, _ = processor([Recording("one"), BeginOnly(), Recording("two")])
    assert run.process(unit(1)) == "done"
    assert SEEN == [
        "one before", "two before",
        "one begin", "begin-only begin", "two begin",
        "one in", "two in", "perform [1]", "two out", "one out",
        "one after", "two after",
        "one leaving succeeded", "two leaving succeeded",
    ]
    assert len(acked) == 1


def test_an_outcome_before_the_start_ends_the_job_with_nothing_else_run() -> None:
    run, acked, retry = processor([Recording("expiry", end_before="expired"), Recording("two")])
    assert run.process(unit(1)) == "done"
    assert SEEN == ["expiry before"]
    assert acked == [] and retry.failed == []


def test_a_claimed_failure_is_not_retried_and_the_steps_hear_its_outcome() -> None:
    run, acked, retry = processor([Recording("one"), Recording("limit", claims="rescheduled")])
    run.process(unit("fail"))
    assert SEEN[-4:] == ["one claim", "limit claim", "one leaving rescheduled",
                         "limit leaving rescheduled"]
    assert acked == [] and retry.failed == []


def test_an_unclaimed_failure_is_left_to_the_retry_after_the_steps_leave() -> None:
    run, acked, retry = processor([Recording("one")])
    run.process(unit("fail"))
    assert SEEN[-2:] == ["one claim", "one leaving failed"]
    assert retry.failed == ["a" * 24] and acked == []


def test_an_async_job_runs_the_same_hooks_with_the_async_wrap() -> None:
    run, acked, _ = processor([Recording("one")])
    asyncio.run(run.aprocess(unit(2), lambda: False))
    assert SEEN == ["one before", "one begin", "one ain", "perform [2]", "one aout",
                    "one after", "one leaving succeeded"]
    assert len(acked) == 1


class AsyncRecorded(rfetch.Job):
    queue = "default"

    async def perform(self, *args: Any) -> None:
        await asyncio.sleep(0)
        SEEN.append(f"aperform {list(args)}")


class Idle(Recording):
    """A wrapping step with nothing to wrap for now (a server chain left empty)."""

    def wraps(self, run: JobRun) -> bool:
        SEEN.append(f"{self.name} wraps?")
        return False


def async_unit(*args: Any) -> UnitOfWork:
    name = Registry([AsyncRecorded]).names()[0]
    raw = json.dumps({"class": name, "jid": "b" * 24, "args": list(args),
                      "queue": "default"}).encode()
    return UnitOfWork("default", raw, "private", Routing.parse(raw), cast("Any", None))


def test_an_async_job_no_step_wraps_is_awaited_without_the_chain_and_acked_as_told() -> None:
    SEEN.clear()
    acked: list[UnitOfWork] = []
    told: list[UnitOfWork] = []
    run = Processor(fake_context(None), Registry([AsyncRecorded]), cast("Any", FakeRetry()),
                    Steps([Idle("idle")]), acked.append)
    asyncio.run(run.aprocess(async_unit(3), lambda: False, told.append))
    assert SEEN == ["idle before", "idle begin", "idle wraps?", "aperform [3]", "idle after",
                    "idle leaving succeeded"]
    assert acked == [] and len(told) == 1  # the loop's own acknowledgement, when given


def test_an_async_job_one_step_wraps_goes_through_the_whole_chain() -> None:
    SEEN.clear()
    acked: list[UnitOfWork] = []
    run = Processor(fake_context(None), Registry([AsyncRecorded]), cast("Any", FakeRetry()),
                    Steps([Idle("idle"), Recording("one")]), acked.append)
    asyncio.run(run.aprocess(async_unit(4), lambda: False))
    # One step wraps: the whole chain runs, as before the shortcut.
    assert SEEN[4:10] == ["idle wraps?", "idle ain", "one ain", "aperform [4]", "one aout",
                          "idle aout"]
    assert len(acked) == 1


def test_the_built_in_list_keeps_the_user_middleware_innermost() -> None:
    steps = server_steps(fake_context(None, config=Config()), cast("Any", FakeRetry()),
                         lambda unit: None, cast("Any", None))
    assert steps.names() == [
        "expiry", "cancel-before-start", "coalesce", "batch-context", "progress",
        "result-storage", "over-limit", "durable", "server-middleware",
    ]
    assert [s.name for s in steps.wrap] == ["server-middleware"]
