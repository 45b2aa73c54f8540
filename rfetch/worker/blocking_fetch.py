"""The blocking fetch (``BLMOVE``) of an idle worker, run by an idle processor thread.

When a fetch finds nothing and no job waits, the fetcher hands the blocking fetch to an
idle processor thread through the hand-off queue, and that thread runs the job it gets
itself: on an idle worker a job goes from Redis to ``perform`` without a hand-off between
threads (Sidekiq's processors fetch for themselves for the same reason), and no job is
fetched while no thread is free.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Protocol

from rfetch.worker.acks import ACK_MAX_DELAY, DeferredAcks
from rfetch.worker.context import WorkerContext
from rfetch.worker.event_loop import AsyncPool
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.handoff import BlockingFetch, HandOff
from rfetch.worker.push_back import PushBack
from rfetch.worker.started import StartMarks
from rfetch.worker.unit import UnitOfWork

Split = Callable[[list[UnitOfWork]], tuple[list[UnitOfWork], list[UnitOfWork]]]
"""Splits fetched jobs into the async ones (for the event loop) and the others."""


class Feeder(Protocol):
    """What the blocking fetch shares with the pool that it feeds (the manager's)."""

    fetch: ReliableFetch
    """The reliable fetch of this process."""
    acks: DeferredAcks
    """The processor's deferred acknowledgements (not deferred while blocking)."""
    pool: HandOff
    """The held jobs and the hand-off queue."""
    paused: Callable[[], Collection[str]]
    """The names of queues not to fetch from now (queue pausing)."""
    aio: AsyncPool | None
    """The event loop of async jobs, or None without async job classes."""
    push_back: PushBack
    """Pushes back jobs fetched while going quiet or pausing."""
    marks: StartMarks
    """The start marks (Redis marks the job an idle thread's blocking fetch brings)."""

    def split(self, units: list[UnitOfWork]) -> tuple[list[UnitOfWork], list[UnitOfWork]]:
        """Fetched jobs split into the async ones (for the event loop) and the others."""
        ...


class BlockingHandOff:
    """Both sides of the blocking fetch: the fetcher's (:meth:`block`) and the idle
    thread's (:meth:`run`).

    Args:
        context: config (block timeout and network timeout, seconds, for the wait once
            quiet) and work state (busy threads and quiet flag).
        feeder: the pool it feeds (the manager).
    """

    def __init__(self, context: WorkerContext, feeder: Feeder) -> None:
        self.config = context.config
        self.work = context.work
        self.fetch = feeder.fetch
        self.acks = feeder.acks
        self.pool = feeder.pool
        self.paused = feeder.paused
        self.split: Split = feeder.split
        self.aio = feeder.aio
        self.push_back = feeder.push_back
        self.marks = feeder.marks

    def run(self, ident: int, request: BlockingFetch) -> UnitOfWork | None:
        """Run the blocking fetch in this (idle) thread; the first job it gets is started
        by this thread (marked started in the same lock section as it is held), the others
        are handed to the pool.

        When this thread got one job and nothing else, the fetcher (waiting in
        :meth:`block`) is told only once the job is about to be performed
        (:meth:`WorkState.at_perform`): woken at once it would run its next fetch and hand
        the next blocking fetch to another thread while this one starts the job, and take
        the GIL (and, on one CPU, the CPU) from it: about half a millisecond of an idle
        worker's latency, more under load."""
        sent_at = time.monotonic()
        units: list[UnitOfWork] = []
        slot = f"t{ident:x}"  # the thread's start-mark slot, as Manager._run marks it
        marked = False
        try:
            if not self.work.quiet:
                units, marked = self.fetch.wait_for_work(request.paused, slot)
                if marked:  # this thread does not mark it again; pushed back, it is unmarked
                    self.marks.marked(units[0], slot)
        except Exception as exc:  # the fetcher backs off and sweeps
            request.error = exc
        with self.pool.cond:
            admitted, rejected = self.pool.admit(units, sent_at, self.work.quiet, self.paused())
            request.units = admitted
            request.done = True
            looped, threaded = self.split(admitted)
            if threaded:
                self.pool.started[ident] = time.monotonic()
            for unit in threaded[1:]:
                self.pool.queue.put(unit)
            if len(threaded) == 1 and not looped and not rejected:
                self.work.at_perform(ident, self._tell_fetcher)
            else:
                self.pool.cond.notify_all()
        if marked and any(unit is units[0] for unit in looped):
            self.marks.ended(units[0])  # an async job: its loop slot marks it, not this thread
        if looped and self.aio is not None:
            self.aio.submit(looped)
        if rejected:
            self.push_back.requeue(rejected, "fetched while going quiet or pausing")
        return threaded[0] if threaded else None

    def _tell_fetcher(self) -> None:
        with self.pool.cond:
            self.pool.cond.notify_all()

    def block(self, paused: Collection[str]) -> list[UnitOfWork]:
        """Blocking fetch by an idle processor thread (:meth:`run`), which runs what it
        gets; meanwhile threads acknowledge their jobs themselves.

        Raises:
            Exception: what the blocking fetch raised (e.g. Redis unreachable).
        """
        for unit in self.acks.deferring(False):
            unit.acknowledge()
        request = BlockingFetch(paused)
        try:
            with self.pool.cond:
                if self.work.quiet:
                    return []
                self.pool.queue.put(request)
                # Once quiet, a fetch not yet taken by a thread is cancelled; one under way
                # is awaited, so that what it moves is pushed back before the pool ends.
                limit = self.config.block_timeout + self.config.network_timeout
                while not request.done:
                    if self.work.quiet:
                        if limit <= 0:
                            break
                        limit -= ACK_MAX_DELAY
                    self.pool.cond.wait(ACK_MAX_DELAY if self.work.quiet else None)
            if request.error is not None:
                raise request.error
            return request.units
        finally:
            self.acks.deferring(True)
