"""What this process is doing now: its busy threads and whether it is quiet.

Shared by the manager (which records it), the heartbeat (which publishes it in
``<identity>:work`` and the process hash) and the metrics (busy threads, quiet), so none of
them depends on another: Sidekiq keeps the same state in one ``WorkSet`` for the same reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from rfetch.worker.capacity import Busy

if TYPE_CHECKING:
    from rfetch.jobs.job import Job
    from rfetch.jobs.job_control import JobControl
    from rfetch.jobs.payload import Payload
    from rfetch.worker.unit import UnitOfWork


class Execution(NamedTuple):
    """A job being performed, as the timekeeper needs it (time limits, cancellation).

    Attributes:
        unit: the fetched job.
        payload: its parsed payload.
        instance: the job object (``retry_in``, ``retries_exhausted``).
        control: its deadline and cancel flag.
    """

    unit: UnitOfWork
    payload: Payload
    instance: Job
    control: JobControl


class WorkState:
    """Busy threads and loop slots (id -> job and start time) and the quiet flag of one
    process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, tuple[UnitOfWork, float]] = {}
        self._looped: set[int] = set()  # ids of _running that are event-loop slots
        self._executions: dict[int, Execution] = {}
        self._quiet = threading.Event()
        self._at_perform: dict[int, Callable[[], None]] = {}

    def begin(self, thread_id: int, unit: UnitOfWork, looped: bool = False) -> None:
        """Note that thread ``thread_id`` starts running ``unit`` now; ``looped``: the id is
        an event-loop slot's (an async job), not a processor thread's."""
        with self._lock:
            self._running[thread_id] = (unit, time.time())
            if looped:
                self._looped.add(thread_id)

    def end(self, thread_id: int) -> None:
        """Note that thread ``thread_id`` finished its job (or was abandoned before)."""
        with self._lock:
            self._running.pop(thread_id, None)
            self._executions.pop(thread_id, None)
            self._looped.discard(thread_id)
            then = self._at_perform.pop(thread_id, None)
        if then is not None:
            then()

    def watch(self, thread_id: int, execution: Execution) -> None:
        """Note the execution thread ``thread_id`` is performing (once its class is known)."""
        with self._lock:
            if thread_id in self._running:
                self._executions[thread_id] = execution
            then = self._at_perform.pop(thread_id, None)
        if then is not None:
            then()

    def at_perform(self, thread_id: int, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, in thread ``thread_id``, when it is about to perform its
        next job (:meth:`watch`, before the server middleware) or ends it before
        (:meth:`end`): what the idle worker's blocking fetch defers past a job's start."""
        with self._lock:
            self._at_perform[thread_id] = callback

    def executions(self) -> dict[int, Execution]:
        """Thread id -> execution, for every thread performing a job."""
        with self._lock:
            return dict(self._executions)

    def abandon(self, thread_id: int) -> None:
        """Stop counting thread ``thread_id`` as busy: the hard path recorded its job, and
        the thread, which cannot be stopped, ends with the process."""
        with self._lock:
            self._running.pop(thread_id, None)
            self._executions.pop(thread_id, None)
            self._looped.discard(thread_id)

    def running(self) -> dict[int, tuple[UnitOfWork, float]]:
        """Thread id -> (job, start time in float epoch seconds) for every busy thread."""
        with self._lock:
            return dict(self._running)

    def busy(self) -> int:
        """Threads and loop slots running a job now."""
        with self._lock:
            return len(self._running)

    def occupancy(self) -> Busy:
        """Jobs running now, on threads and on loop slots."""
        with self._lock:
            return self._split()

    def snapshot(self) -> tuple[dict[int, tuple[UnitOfWork, float]], Busy]:
        """:meth:`running` and :meth:`occupancy` read at one instant (the heartbeat's)."""
        with self._lock:
            return dict(self._running), self._split()

    def _split(self) -> Busy:
        looped = len(self._looped)
        return Busy(threads=len(self._running) - looped, async_slots=looped)

    @property
    def quiet(self) -> bool:
        """Whether fetching has stopped (TSTP, or shutting down)."""
        return self._quiet.is_set()

    def go_quiet(self) -> None:
        """Stop fetching from now on (never undone: Sidekiq's quiet is final)."""
        self._quiet.set()

    def sleep(self, seconds: float) -> bool:
        """Wait ``seconds`` or until quiet, whichever comes first; True if quiet."""
        return self._quiet.wait(seconds)
