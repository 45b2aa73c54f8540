"""rfetch.testing: fake and inline modes, their pytest fixtures, and the Client's sink."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

import rfetch
from rfetch import testing
from rfetch.config import Config
from rfetch.jobs.payload import Payload
from rfetch.push.client import DEFAULT
from tests.support.aio import run_async

events: list[tuple[str, Any]] = []


class Welcome(rfetch.Job):
    queue = "mail"

    def perform(self, user_id: int, template: str = "welcome") -> None:
        events.append(("welcome", [user_id, template, self.jid]))


class Fails(rfetch.Job):
    def perform(self, reason: str) -> None:
        events.append(("fails", reason))
        raise RuntimeError(reason)


class Chains(rfetch.Job):
    def perform(self, depth: int) -> None:
        events.append(("chains", depth))
        if depth > 0:
            Chains.perform_async(depth - 1)


class Merged(rfetch.Job):
    coalesce = True

    def ordering_key(self, item: int, *rest: Any) -> str:
        return f"item:{item}"

    def perform(self, batch: list[list[Any]]) -> None:
        events.append(("merged", batch))


class Awaits(rfetch.Job):
    async def perform(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        events.append(("awaited", seconds))


@rfetch.job(queue="fn")
def notify(user_id: int, *, loud: bool = False) -> None:
    events.append(("notify", user_id))


@pytest.fixture(autouse=True)
def _clean() -> None:
    events.clear()


def tagging(job: rfetch.Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
    events.append(("middleware", payload["class"]))
    call_next()


def test_fake_keeps_jobs_as_a_worker_would_read_them() -> None:
    with testing.fake() as queues:
        jid = Welcome.perform_async(42, "hello")
        Welcome.perform_in(60, 7)
        notify.perform_async(3)
        assert events == []  # nothing ran
        waiting = queues.jobs(Welcome)
        assert [j["args"] for j in waiting] == [[42, "hello"], [7]]
        assert waiting[0]["jid"] == jid and waiting[0]["queue"] == "mail"
        assert "at" not in waiting[0] and waiting[1]["at"] > waiting[1]["created_at"] + 59
        assert testing.jobs(queue="fn")[0]["class"] == notify.job_class.job_name()
        assert len(queues) == 3


def test_strict_args_and_options_still_apply() -> None:
    with testing.fake() as queues:
        with pytest.raises(rfetch.ArgsNotSerializable, match="datetime"):
            Welcome.perform_async(1, dt.datetime.now())  # type: ignore[arg-type]
        with pytest.raises(rfetch.ConfigError):
            Welcome.set(queue="").perform_async(1)
        with pytest.raises(TypeError, match="unexpected keyword"):
            Welcome.perform_async(1, tmpl="x")  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="by keyword"):
            notify.perform_async(1, loud=True)
        assert len(queues) == 0


def test_keyword_arguments_are_bound_to_perform() -> None:
    with testing.fake() as queues:
        Welcome.perform_async(user_id=5)
        Welcome.perform_async(6, template="t")
        notify.perform_async(user_id=9)
        assert [j["args"] for j in queues.jobs()] == [[5], [6, "t"], [9]]


def test_drain_runs_through_server_middleware_including_pushes_made_while_draining() -> None:
    with testing.fake(Config(server_middleware=[tagging])) as queues:
        Chains.perform_async(2)
        Welcome.perform_async(1)
        assert queues.drain(Chains) == 3
        assert events == [
            ("middleware", Chains.job_name()), ("chains", 2),
            ("middleware", Chains.job_name()), ("chains", 1),
            ("middleware", Chains.job_name()), ("chains", 0),
        ]
        assert [j["class"] for j in queues.jobs()] == [Welcome.job_name()]
        assert testing.drain() == 1
        assert events[-1][0] == "welcome" and events[-1][1][2]  # the jid is set
        assert len(queues) == 0


def test_drain_has_retries_off_and_raises_the_jobs_error() -> None:
    with testing.fake() as queues:
        Fails.perform_async("boom")
        Welcome.perform_async(1)
        with pytest.raises(RuntimeError, match="boom"):
            queues.drain()
        assert [j["class"] for j in queues.jobs()] == [Welcome.job_name()]  # failed one gone
        assert queues.drain() == 1


def test_perform_one_and_clear() -> None:
    with testing.fake() as queues:
        Welcome.perform_async(1)
        Welcome.perform_async(2)
        Fails.perform_async("x")
        assert queues.perform_one(Welcome)["args"] == [1]
        assert testing.clear(Fails) == 1
        assert queues.clear() == 1
        with pytest.raises(LookupError):
            queues.perform_one()


def test_coalesced_jobs_of_a_key_drain_as_one_execution() -> None:
    with testing.fake() as queues:
        Merged.set(score=2).perform_async(1, "b")
        Merged.set(score=1).perform_async(1, "a")
        Merged.perform_async(2, "other key")
        assert queues.drain() == 2
    assert events == [("merged", [[1, "a"], [1, "b"]]), ("merged", [[2, "other key"]])]


def test_async_perform_is_awaited() -> None:
    with testing.fake() as queues:
        Awaits.perform_async(0.001)
        queues.drain()
    assert events == [("awaited", 0.001)]
    assert Awaits.is_async and not Welcome.is_async


def test_client_middleware_runs_and_may_drop_a_push() -> None:
    def drop_odd(job_class: str, job: Payload, queue: str, redis: Any,
                 call_next: Callable[[], Payload | None]) -> Payload | None:
        if job["args"][0] % 2:
            return None
        job["tags"] = ["even"]
        return call_next()

    with testing.fake(Config(client_middleware=[drop_odd])) as queues:
        assert Welcome.perform_async(1) is None
        assert Welcome.perform_async(2) is not None
        assert [j["tags"] for j in queues.jobs()] == [["even"]]


def test_inline_runs_at_once_and_raises() -> None:
    with testing.inline(Config(server_middleware=[tagging])) as runner:
        Welcome.perform_async(1)
        jid = events[1][1][2]
        assert events == [("middleware", Welcome.job_name()), ("welcome", [1, "welcome", jid])]
        with pytest.raises(RuntimeError, match="now"):
            Fails.perform_async("now")
        assert [p["class"] for p in runner.performed] == [Welcome.job_name(), Fails.job_name()]


def test_the_default_client_is_put_back() -> None:
    before = DEFAULT.peek()
    with testing.fake():
        assert DEFAULT.peek() is not before
        with testing.inline(), pytest.raises(RuntimeError, match="fake mode"):
            testing.jobs()
        assert testing.jobs() == []
    assert DEFAULT.peek() is before
    with pytest.raises(RuntimeError, match="fake mode"):
        testing.drain()


def test_a_client_of_your_own_takes_a_sink() -> None:
    queues = testing.FakeQueues()
    client = rfetch.Client(Config(), sink=queues)
    jid = Welcome.set(client=client).perform_async(8)
    assert queues.jobs()[0]["jid"] == jid


def test_unknown_class_fails_like_on_a_worker() -> None:
    with testing.fake() as queues:
        rfetch.Client(Config(), sink=queues).push("nowhere.Gone", [1])
        with pytest.raises(rfetch.UnknownJob):
            queues.drain()


def test_fixtures_from_the_plugin(rfetch_fake: testing.FakeQueues) -> None:
    Welcome.perform_async(1)
    assert len(rfetch_fake.jobs(Welcome)) == 1


def test_inline_fixture(rfetch_inline: testing.InlineRunner) -> None:
    Welcome.perform_async(3)
    assert events[0][1][0] == 3


def test_adrain_awaits_async_jobs_in_the_running_loop() -> None:
    async def scenario(queues: testing.FakeQueues) -> int:
        Awaits.perform_async(0.001)
        Welcome.perform_async(5)
        return await queues.adrain()

    with testing.fake() as queues:
        assert run_async(scenario(queues)) == 2
    assert [e[0] for e in events] == ["awaited", "welcome"]
