"""Jobs for the multi-process limiter tests; workers load them with ``-r limiter_jobs``.
Evidence goes outside Redis through :func:`testjobs.record` (``RFETCH_TEST_RECORD``):
``<event> <jid> <pid> <time.time()> <extra>`` lines, one clock for every process (the
host's)."""

from __future__ import annotations

import time
from typing import Any

from testjobs import record

import rfetch

WINDOW = rfetch.Limiter.window("mp-window", 50, per=1, wait_timeout=30)
"""50 calls per second, fixed windows on Redis's clock."""

SLOTS = rfetch.Limiter.concurrent("mp-slots", 5, lock_timeout=30, wait_timeout=60)
"""At most 5 blocks at once."""

SHORT_LOCK = rfetch.Limiter.concurrent("mp-short", 1, lock_timeout=3, wait_timeout=0)
"""One lock whose holder, once killed, loses it 3 s after its last renewal."""

FULL = rfetch.Limiter.window(
    "mp-full", 1, per="day", wait_timeout=0, reschedule=2, backoff=lambda count, job: 0.5
)
"""Spent by the test before the jobs run: every call is over the limit."""


class WindowCall(rfetch.Job):
    """Records ``call`` once inside the window limiter's block, with the time the granted
    attempt was sent (``Grant.sent_at``, the same clock): the grant happened between the
    two."""

    retry = 0

    def perform(self, *args: Any) -> None:
        with WINDOW.within_limit() as grant:
            record("call", self.jid, f"{grant.sent_at:.6f}")


class SlotHold(rfetch.Job):
    """Holds one of 5 slots for ``seconds``: ``in`` after the grant, ``out`` before the
    release, so the evidence intervals lie inside the lock's."""

    retry = 0

    def perform(self, seconds: float) -> None:
        with SLOTS.within_limit():
            record("in", self.jid)
            time.sleep(seconds)
            record("out", self.jid)


class HoldShortLock(rfetch.Job):
    """Takes the one-lock limiter and keeps it ``seconds`` (until killed)."""

    retry = 0

    def perform(self, seconds: float) -> None:
        with SHORT_LOCK.within_limit():
            record("held", self.jid)
            time.sleep(seconds)
            record("released", self.jid)


class OverFull(rfetch.Job):
    """Always over the limit: rescheduled twice, then a normal failure."""

    retry = 1

    def perform(self, *args: Any) -> None:
        record("try", self.jid)
        with FULL.within_limit():
            record("ran", self.jid)


class AsyncOverFull(rfetch.Job):
    """OverFull as an async job: ``async with`` on the event loop."""

    retry = 1

    async def perform(self, *args: Any) -> None:
        record("try", self.jid)
        async with FULL.within_limit():
            record("ran", self.jid)
