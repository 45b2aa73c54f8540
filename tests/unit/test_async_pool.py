"""The event loop's bookkeeping around async jobs, on fakes (a started AsyncPool, a fake
processor and manager): jobs started together are marked started in one write before any
of them runs; jobs that end in one pass of the loop are handed back to the manager in one
call; an acknowledgement the fetcher does not defer is sent from the loop's executor, never
from the loop thread; and the cancellation at stop waits for acknowledgements under way, so
that the push-back that follows finds those jobs gone."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from rfetch.config import Config
from rfetch.worker.acks import DeferredAcks
from rfetch.worker.event_loop import AsyncPool
from rfetch.worker.processor import Handled
from rfetch.worker.registry import Registry
from rfetch.worker.unit import UnitOfWork
from tests.support.wait import wait_for
from tests.support.worker_context import fake_context


class Lists:
    """The reliable fetch's acknowledgement: records the thread that sent each one, after
    ``delay`` seconds (an acknowledgement under way)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.started = threading.Event()
        self.acked: list[tuple[UnitOfWork, str]] = []

    def acknowledge(self, unit: UnitOfWork, give_up: float | None = None) -> bool:
        self.started.set()
        time.sleep(self.delay)
        self.acked.append((unit, threading.current_thread().name))
        return True


class Marks:
    def __init__(self) -> None:
        self.batches: list[list[UnitOfWork]] = []

    def mark_many(self, started: list[tuple[str, UnitOfWork]]) -> None:
        self.batches.append([unit for _, unit in started])


class Host:
    """The manager's side: start marks, deferred acknowledgements, ended jobs."""

    def __init__(self) -> None:
        self.marks = Marks()
        self.acks = DeferredAcks()
        self.ended: list[list[tuple[UnitOfWork, Handled]]] = []

    def async_done(self, ended: list[tuple[UnitOfWork, Handled]]) -> None:
        self.ended.append(list(ended))


class FakeProcessor:
    """Each job notes whether it was marked before it ran, awaits once, then succeeds."""

    def __init__(self, marks: Marks) -> None:
        self.marks = marks
        self.marked_first: list[bool] = []

    async def aprocess(self, unit: UnitOfWork, shutting_down: Callable[[], bool],
                       ack: Callable[[UnitOfWork], object], slot: int) -> None:
        self.marked_first.append(any(unit in batch for batch in self.marks.batches))
        await asyncio.sleep(0)
        ack(unit)


def units(n: int, lists: Lists) -> list[UnitOfWork]:
    return [UnitOfWork("default", b'{"jid":"%d"}' % i, "private", None, cast("Any", lists))
            for i in range(n)]


@pytest.fixture
def host() -> Host:
    return Host()


@pytest.fixture
def pool(host: Host) -> Iterator[AsyncPool]:
    context = fake_context(None, config=Config(async_concurrency=100))
    made = AsyncPool(context, cast("Any", FakeProcessor(host.marks)), Registry([]),
                     cast("Any", host))
    made.start()
    yield made
    made.cancel(5)
    made.stop()


def ended(host: Host) -> int:
    return sum(len(batch) for batch in host.ended)


def test_jobs_started_together_are_marked_in_one_write_before_any_runs(
    pool: AsyncPool, host: Host
) -> None:
    fetched = units(50, Lists())
    pool.submit(fetched)
    wait_for(lambda: ended(host) == 50, 20, "50 jobs ended")
    assert host.marks.batches == [fetched]
    assert pool.processor.marked_first == [True] * 50  # type: ignore[attr-defined]


def test_jobs_ending_in_one_pass_are_handed_back_in_one_call(
    pool: AsyncPool, host: Host
) -> None:
    fetched = units(50, Lists())
    pool.submit(fetched)
    wait_for(lambda: ended(host) == 50, 20, "50 jobs ended")
    # All 50 started in one callback, awaited once, and ended in the same pass.
    assert [[unit for unit, _ in batch] for batch in host.ended] == [fetched]
    assert {handled for batch in host.ended for _, handled in batch} == {"done"}


def test_an_acknowledgement_not_deferred_is_sent_off_the_loop_thread(
    pool: AsyncPool, host: Host
) -> None:
    lists = Lists()
    fetched = units(20, lists)
    pool.submit(fetched)
    wait_for(lambda: len(lists.acked) == 20, 20, "20 acknowledgements")
    assert sorted(id(unit) for unit, _ in lists.acked) == sorted(id(u) for u in fetched)
    threads = {name for _, name in lists.acked}
    assert "rfetch-event-loop" not in threads
    assert all(name.startswith("rfetch-async") for name in threads)


def test_a_deferred_acknowledgement_is_left_to_the_fetcher(
    pool: AsyncPool, host: Host
) -> None:
    host.acks.deferring(True)
    lists = Lists()
    fetched = units(10, lists)
    pool.submit(fetched)
    wait_for(lambda: ended(host) == 10, 20, "10 jobs ended")
    assert lists.acked == []
    assert host.acks.take() == fetched


def test_the_cancel_at_stop_waits_for_acknowledgements_under_way(
    pool: AsyncPool, host: Host
) -> None:
    lists = Lists(delay=0.5)
    fetched = units(3, lists)
    pool.submit(fetched)
    assert lists.started.wait(20)
    pool.cancel(20)
    assert len(lists.acked) == 3
