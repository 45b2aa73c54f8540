"""Deferred acknowledgements: a finished job's LREM rides on the fetcher's next Lua call.

While the queues are busy, one round trip acknowledges a batch and fetches the next one.
The fetcher sends pending acknowledgements within ``ACK_MAX_DELAY`` seconds; while it blocks
on an empty queue, and once the process is quiet, threads acknowledge their jobs at once. A
deferred acknowledgement widens the window in which a kill -9 runs a finished job again to
at most ``concurrency + prefetch`` jobs, the bound docs/guarantees.md states.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rfetch.worker.unit import UnitOfWork

ACK_MAX_DELAY = 0.05
"""Seconds a finished job waits at most for its acknowledgement to be sent."""


class DeferredAcks:
    """The processor's acknowledgement: call it with a finished job.

    Until :meth:`deferring` turns it on (the fetcher runs), and after :meth:`close` (quiet),
    a job is acknowledged at once (:meth:`UnitOfWork.acknowledge`).

    Args:
        after: called after each acknowledgement, on the processor thread, before it takes
            its next job (``Config.min_replicas_acks``:
            :meth:`rfetch.worker.ack_replicas.AckReplicas.after_ack`). When given,
            acknowledgements are never deferred: each is sent at once and waited for.
    """

    def __init__(self, after: Callable[[], object] | None = None) -> None:
        self._after = after
        self._lock = threading.Lock()
        self._pending: list[UnitOfWork] = []
        self._since = 0.0
        self._deferring = False
        self._closed = False

    def __call__(self, unit: UnitOfWork) -> None:
        """Acknowledge a finished job: with the next fetch, or now."""
        if self.defer(unit):
            return  # the fetcher sends it within ACK_MAX_DELAY; no wake-up per job
        unit.acknowledge()
        if self._after is not None:
            self._after()

    def defer(self, unit: UnitOfWork) -> bool:
        """Leave ``unit``'s acknowledgement to the fetcher's next call if it defers them
        now; False when it does not (the caller acknowledges it, through this object, where
        a round trip may wait: the event loop sends it from its executor)."""
        with self._lock:
            if self._deferring:
                if not self._pending:
                    self._since = time.monotonic()
                self._pending.append(unit)
                return True
        return False

    def deferring(self, on: bool) -> list[UnitOfWork]:
        """Defer from now on (``on``, ignored once closed), or stop deferring and return
        the jobs still pending, which the caller acknowledges."""
        with self._lock:
            self._deferring = on and not self._closed and self._after is None
            return [] if self._deferring else self._take()

    def close(self) -> None:
        """Acknowledge at once from now on (quiet); pending jobs stay for :meth:`take`."""
        with self._lock:
            self._closed = True
            self._deferring = False

    def due(self) -> bool:
        """Whether the oldest pending acknowledgement has waited ``ACK_MAX_DELAY``."""
        with self._lock:
            return bool(self._pending) and time.monotonic() - self._since >= ACK_MAX_DELAY

    def take(self) -> list[UnitOfWork]:
        """Every pending acknowledgement, for the fetcher's next call."""
        with self._lock:
            return self._take()

    def put_back(self, units: list[UnitOfWork]) -> None:
        """Pending again, first: a fetch that carried them failed."""
        if not units:
            return
        with self._lock:
            if not self._pending:
                self._since = time.monotonic()
            self._pending[:0] = units

    def _take(self) -> list[UnitOfWork]:
        pending, self._pending = self._pending, []
        return pending
