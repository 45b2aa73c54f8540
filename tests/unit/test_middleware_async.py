"""Server middleware around async jobs and ``async def`` middleware around sync jobs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

import rfetch
from rfetch.jobs.middleware import AsyncNext, run_server_chain, run_server_chain_async
from rfetch.jobs.payload import Payload

EVENTS: list[str] = []


class Both:
    """A middleware with a sync and an async form."""

    def __call__(self, job: rfetch.Job, payload: Payload, queue: str,
                 call_next: Callable[[], None]) -> None:
        EVENTS.append("both:sync")
        call_next()

    async def acall(self, job: rfetch.Job, payload: Payload, queue: str,
                    call_next: AsyncNext) -> None:
        EVENTS.append("both:async>")
        await call_next()
        EVENTS.append("both:async<")


async def coroutine_mw(job: rfetch.Job, payload: Payload, queue: str,
                       call_next: AsyncNext) -> None:
    EVENTS.append("coroutine>")
    await call_next()
    EVENTS.append("coroutine<")


def sync_mw(job: rfetch.Job, payload: Payload, queue: str, call_next: Callable[[], None]) -> None:
    EVENTS.append(f"sync> in loop thread: {threading.current_thread().name == 'loop'}")
    call_next()
    EVENTS.append("sync<")


class Job(rfetch.Job):
    async def perform(self) -> None:
        await asyncio.sleep(0)
        EVENTS.append("perform")


@pytest.fixture(autouse=True)
def _clear() -> None:
    EVENTS.clear()


def run_in_loop_thread(coro_factory: Callable[[], Any]) -> None:
    """Run on a thread named 'loop', as a worker's event loop thread."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coro_factory())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, name="loop")
    thread.start()
    thread.join(10)
    if errors:
        raise errors[0]


def test_every_form_wraps_an_async_job_in_order() -> None:
    chain: list[Any] = [Both(), coroutine_mw, sync_mw]
    job = Job()
    run_in_loop_thread(lambda: run_server_chain_async(chain, job, {}, "q", job.perform))
    assert EVENTS == [
        "both:async>", "coroutine>", "sync> in loop thread: False", "perform", "sync<",
        "coroutine<", "both:async<",
    ]


def test_a_failure_propagates_through_every_form() -> None:
    class Fails(rfetch.Job):
        async def perform(self) -> None:
            raise ValueError("job failed")

    chain: list[Any] = [Both(), coroutine_mw, sync_mw]
    job = Fails()
    with pytest.raises(ValueError, match="job failed"):
        run_in_loop_thread(lambda: run_server_chain_async(chain, job, {}, "q", job.perform))
    assert "perform" not in EVENTS and "sync<" not in EVENTS


def test_an_async_middleware_wraps_a_sync_job() -> None:
    chain: list[Any] = [Both(), coroutine_mw]
    run_server_chain(chain, rfetch.Job(), {}, "q", lambda: EVENTS.append("perform"))
    assert EVENTS == ["both:sync", "coroutine>", "perform", "coroutine<"]


def test_an_async_middleware_around_a_sync_job_inside_a_running_loop() -> None:
    """Sync code called from a running loop (a notebook, Playwright's sync API) still runs
    an async middleware: on a fresh loop in a thread of its own."""

    async def inside_a_loop() -> None:
        run_server_chain([coroutine_mw], rfetch.Job(), {}, "q", lambda: EVENTS.append("perform"))

    run_in_loop_thread(inside_a_loop)
    assert EVENTS == ["coroutine>", "perform", "coroutine<"]
