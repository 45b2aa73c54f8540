"""What this process is doing now: its busy threads and whether it is quiet.

Shared by the manager (which records it), the heartbeat (which publishes it in
``<identity>:work`` and the process hash) and the metrics (busy threads, quiet), so none of
them depends on another: Sidekiq keeps the same state in one ``WorkSet`` for the same reason.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rfetch.worker.unit import UnitOfWork


class WorkState:
    """Busy threads (thread id -> job and start time) and the quiet flag of one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, tuple[UnitOfWork, float]] = {}
        self._quiet = threading.Event()

    def begin(self, thread_id: int, unit: UnitOfWork) -> None:
        """Note that thread ``thread_id`` starts running ``unit`` now."""
        with self._lock:
            self._running[thread_id] = (unit, time.time())

    def end(self, thread_id: int) -> None:
        """Note that thread ``thread_id`` finished its job."""
        with self._lock:
            del self._running[thread_id]

    def running(self) -> dict[int, tuple[UnitOfWork, float]]:
        """Thread id -> (job, start time in float epoch seconds) for every busy thread."""
        with self._lock:
            return dict(self._running)

    def busy(self) -> int:
        """Threads running a job now."""
        with self._lock:
            return len(self._running)

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
