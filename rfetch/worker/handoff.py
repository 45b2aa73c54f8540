"""The jobs a worker process holds between their fetch and their end, shared by the
fetcher and the processor threads under one lock: the hand-off queue (jobs waiting for a
thread, and the blocking fetch handed to an idle thread), the jobs held, and the start time
of each running job."""

from __future__ import annotations

import queue
import threading
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
    and push back ``give_back``; ``probe``: a fetch of one job that looks for async jobs
    (fetched even after an empty fetch)."""

    room: int
    acks: list[UnitOfWork]
    sweep: str | None
    held: list[UnitOfWork]
    give_back: list[UnitOfWork]
    probe: bool = False


Item = UnitOfWork | BlockingFetch | None
"""In the hand-off queue: a job, the blocking fetch, or None (a thread's end)."""


class HandOff:
    """Held jobs and the hand-off queue of one worker process; hold ``cond`` (re-entrant)
    around every use but of ``queue.get``.

    Args:
        concurrency: processor threads.
    """

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.cond = threading.Condition()
        self.queue: queue.SimpleQueue[Item] = queue.SimpleQueue()
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

    def idle(self) -> int:
        """Threads that take a new job at once: no held job is theirs to run (a thread
        takes a job only from the held ones; called by the fetcher, while no blocking
        fetch is under way)."""
        return self.concurrency - len(self.held) + len(self.looped)

    def thread_free(self) -> bool:
        """Whether a thread is idle with no job waiting for it."""
        with self.cond:
            return len(self.held) - len(self.looped) == len(self.started) < self.concurrency

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
        """Take the waiting jobs ``which`` selects out of the queue and out of the held
        ones; a pending blocking fetch is cancelled when ``quiet``."""
        keep: list[Item] = []
        taken: list[UnitOfWork] = []
        with self.cond:
            while True:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, UnitOfWork) and which(item):
                    taken.append(item)
                    self.held.pop(id(item), None)
                elif isinstance(item, BlockingFetch) and quiet:
                    item.done = True
                else:
                    keep.append(item)
            for item in keep:
                self.queue.put(item)
        return taken
