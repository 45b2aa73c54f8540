"""The jobs a worker process holds between their fetch and their end, shared by the
fetcher and the processor threads under one lock: the backlog (jobs waiting for a thread
that is awake), the hand-off queue (a job handed to a sleeping thread, which wakes it; the
blocking fetch handed to an idle thread), the jobs held, and the start time of each running
job.

Threads are woken sparingly (why: :mod:`rfetch.worker.runners`). A thread that ends a job
takes the next one from the backlog itself, with no hand-off between threads, unless more
threads than the runner limit are about to take jobs; a sleeping thread is woken (one job put
in the queue for it) only while fewer than the limit are, and whenever none is (each runs a
job older than ``spill_after``): a short job never waits behind a long one while a thread
sleeps (the fetcher checks every ``spill_after`` while jobs wait).
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import NamedTuple

from rfetch.worker.unit import UnitOfWork


@dataclass(eq=False)
class BlockingFetch:
    """The blocking fetch, handed to an idle processor thread; filled in by it."""

    paused: Collection[str]
    done: bool = False
    units: list[UnitOfWork] = field(default_factory=list)
    error: Exception | None = None


class Request(NamedTuple):
    """What the fetcher does next: fetch up to ``room`` jobs with ``acks``, sweep the
    private lists first (``sweep``: why strays may sit there, or None; knowing ``held``),
    and push back ``give_back``."""

    room: int
    acks: list[UnitOfWork]
    sweep: str | None
    held: list[UnitOfWork]
    give_back: list[UnitOfWork]


Item = UnitOfWork | BlockingFetch | None
"""In the hand-off queue: a job, the blocking fetch, or None (a thread's end)."""


class HandOff:
    """Held jobs and the hand-off queue of one worker process; hold ``cond`` (re-entrant)
    around every use but of ``queue.get``.

    Args:
        concurrency: processor threads.
        spill_after: seconds (monotonic clock) after which a thread running one job no
            longer counts as about to take a job from the backlog (:meth:`wake`).
    """

    def __init__(self, concurrency: int, spill_after: float) -> None:
        self.concurrency = concurrency
        self.spill_after = spill_after
        self.cond = threading.Condition()
        self.queue: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self.backlog: deque[UnitOfWork] = deque()
        """Held jobs for the threads, not started and not in the queue, oldest first."""
        self.awake = 0
        """Threads running a job, between two, or handed one in the queue and not yet in it."""
        self.held: dict[int, tuple[UnitOfWork, float]] = {}
        """id(unit) -> (unit, ``time.monotonic()`` when its fetch was sent)."""
        self.started: dict[int, float] = {}
        """Thread id -> ``time.monotonic()`` when its job started."""
        self.looped: set[int] = set()
        """id(unit) of the held jobs handed to the event loop (async jobs), not to threads."""

    def waiting(self) -> int:
        """Jobs held for the threads and not started."""
        return len(self.held) - len(self.looped) - len(self.started)

    def release(self, unit: UnitOfWork) -> None:
        """Forget a held job (it ended, or was taken back)."""
        self.held.pop(id(unit), None)
        self.looped.discard(id(unit))

    def thread_free(self) -> bool:
        """Whether a thread is idle with no job waiting for it."""
        with self.cond:
            return len(self.held) - len(self.looped) == len(self.started) < self.concurrency

    def offer(self, units: list[UnitOfWork], limit: int, now: float) -> None:
        """Add held jobs to the backlog and wake threads for it (:meth:`wake`)."""
        self.backlog.extend(units)
        self.wake(limit, now)

    def wake(self, limit: int, now: float, everyone: bool = False) -> None:
        """Wake sleeping threads for the backlog, each handed its first job in the queue,
        until ``limit`` threads are about to take a job (awake and not running a job older
        than ``spill_after``), and one when none is; with ``everyone``, one per waiting job
        (as many as sleep). ``now``: ``time.monotonic()``."""
        waiting = len(self.backlog)
        if not waiting:
            return
        count = waiting
        if not everyone:
            ready = self.awake - self._old(now)
            count = max(limit - ready, 0 if ready > 0 else 1)
        for _ in range(min(count, waiting, self.concurrency - self.awake)):
            self.awake += 1
            self.queue.put(self.backlog.popleft())

    def next_job(self, limit: int, now: float) -> UnitOfWork | None:
        """The next job of the backlog for a thread that ended one, or None: the thread
        goes back to sleep on the queue (the backlog is empty, or more than ``limit``
        threads, this one included, are about to take a job)."""
        if self.backlog and self.awake - self._old(now) <= limit:
            return self.backlog.popleft()
        self.awake -= 1
        return None

    def next_check(self, now: float, longest: float) -> float:
        """Seconds until a running job gets older than ``spill_after`` while jobs wait in
        the backlog (when :meth:`wake` may have to wake a thread); ``longest`` otherwise."""
        if not self.backlog:
            return longest
        ages = [now - start for start in self.started.values() if now - start < self.spill_after]
        if len(ages) < self.awake:  # a thread between two jobs: check again in a while
            ages.append(0.0)
        return min(longest, max(self.spill_after - max(ages, default=0.0), 0.0005))

    def _old(self, now: float) -> int:
        return sum(1 for start in self.started.values() if now - start >= self.spill_after)

    def admit(
        self, units: list[UnitOfWork], sent_at: float, quiet: bool, paused: Collection[str]
    ) -> tuple[list[UnitOfWork], list[UnitOfWork]]:
        """Hold fetched jobs (``sent_at``: monotonic time their fetch was sent); returns
        (held, to push back): all are pushed back when ``quiet``, and those of a queue
        paused meanwhile (a BLMOVE racing a pause)."""
        if quiet:
            return [], units
        admitted = [u for u in units if u.queue not in paused]
        with self.cond:
            for unit in admitted:
                self.held[id(unit)] = (unit, sent_at)
        return admitted, [u for u in units if u.queue in paused]

    def take_waiting(self, which: Callable[[UnitOfWork], bool], quiet: bool) -> list[UnitOfWork]:
        """Take the waiting jobs ``which`` selects out of the queue, the backlog and the
        held ones; a pending blocking fetch is cancelled when ``quiet``."""
        keep: list[Item] = []
        taken: list[UnitOfWork] = []
        with self.cond:
            for unit in self.backlog:
                if which(unit):
                    taken.append(unit)
                    self.held.pop(id(unit), None)
            self.backlog = deque(unit for unit in self.backlog if id(unit) in self.held)
            while True:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, UnitOfWork) and which(item):
                    taken.append(item)
                    self.held.pop(id(item), None)
                    self.awake -= 1  # the thread it was handed to sleeps on
                elif isinstance(item, BlockingFetch) and quiet:
                    item.done = True
                else:
                    keep.append(item)
            for item in keep:
                self.queue.put(item)
        return taken
