"""Async jobs (``async def perform``) for the async worker's tests; a worker loads them with
``-r async_jobs`` (with ``-r testjobs`` for a process that runs both kinds). Evidence goes to
the ``RFETCH_TEST_RECORD`` file as testjobs' does."""

from __future__ import annotations

import asyncio
import os

from testjobs import record

import rfetch


class Waits(rfetch.Job):
    """Records its start, awaits ``seconds``, records its end."""

    async def perform(self, seconds: float) -> None:
        record("start", self.jid)
        await asyncio.sleep(seconds)
        record("done", self.jid)


class Fails(rfetch.Job):
    """Fails after an await."""

    retry = 3

    async def perform(self) -> None:
        await asyncio.sleep(0)
        raise RuntimeError("async failure")


class CancelsItself(rfetch.Job):
    """Raises CancelledError by itself: a failure like any other, not a shutdown."""

    retry = 3

    async def perform(self) -> None:
        await asyncio.sleep(0)
        raise asyncio.CancelledError


@rfetch.job(queue="default")
async def waits_fn(seconds: float) -> None:
    await asyncio.sleep(seconds)
    record("done", "fn")


class Limited(rfetch.Job):
    """Waits past its time limit (pushed with ``timeout``), checking it as a long job does
    at a safe point."""

    retry = 3

    async def perform(self) -> None:
        record("start", self.jid)
        for _ in range(100):
            await asyncio.sleep(0.05)
            self.check_cancelled()
        record("done", self.jid)


class Gated(rfetch.Job):
    """Records its start, then awaits until the file ``path`` exists (a loop slot held busy
    for as long as the test needs, with no timing)."""

    async def perform(self, path: str) -> None:
        record("start", self.jid)
        while not os.path.exists(path):
            await asyncio.sleep(0.05)
        record("done", self.jid)
