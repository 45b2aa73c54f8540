"""Which fetched jobs a worker with async and sync job classes hands to its event loop
(``AsyncPool.accepts``, read with the fast JSON parser on the fetcher's path): jobs of an
async class only; a sync, unknown or unreadable job goes to the threads, which run or fail
it as any other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import pytest

from rfetch.jobs.job import Job
from rfetch.worker.event_loop import AsyncPool
from rfetch.worker.registry import Registry
from rfetch.worker.unit import UnitOfWork
from tests.support.worker_context import fake_context


class Fetched(Job):
    async def perform(self) -> None:
        pass


class Counted(Job):
    def perform(self) -> None:
        pass


class Host:
    """The manager's side, unused to route."""

    marks = None
    acks = None

    def async_done(self, ended: object) -> None:
        pass


@pytest.fixture
def loop() -> Iterator[AsyncPool]:
    """An AsyncPool never started (routing needs no loop thread); its loop closed after."""
    none = cast("Any", None)  # the processor, reporter and marks are not used to route
    registry = Registry([Fetched, Counted])
    pool = AsyncPool(fake_context(none), none, registry, cast("Any", Host()))
    yield pool
    pool._loop.close()


def unit(raw: bytes) -> UnitOfWork:
    return UnitOfWork("default", raw, "private", None, cast("Any", None))


def payload(name: object) -> bytes:
    return json.dumps({"class": name, "args": [], "jid": "j1"}).encode()


def test_only_jobs_of_an_async_class_go_to_the_event_loop(loop: AsyncPool) -> None:
    assert loop.accepts(unit(payload(Fetched.job_name())))
    assert not loop.accepts(unit(payload(Counted.job_name())))
    assert not loop.accepts(unit(payload("nowhere.Unknown")))


def test_an_unreadable_job_goes_to_the_threads_which_fail_it(loop: AsyncPool) -> None:
    assert not loop.accepts(unit(b"not json"))
    assert not loop.accepts(unit(b"[1, 2]"))
    assert not loop.accepts(unit(payload(42)))
    assert not loop.accepts(unit(b'{"args": []}'))
