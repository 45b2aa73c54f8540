"""How many processor threads take short jobs at once: as few as keep the GIL busy.

A worker process runs Python in one thread at a time (the GIL). Each job's Redis round trip
releases the GIL and takes it back; when another thread wants it meanwhile, the two hand it
to each other, and when they sleep on different CPUs each hand-off waits for the other CPU
to wake up (docs/architecture.md, "One CPU per worker process"). For jobs of tens of
microseconds (a no-op, an INCR), ten threads running at once spend more time handing the
GIL around than running jobs; one or two threads in turn run them faster. For jobs that
wait (sleep, I/O, a slow query), every thread that runs one adds throughput.

So the manager lets at most :attr:`RunnerLimit.limit` threads take jobs from the backlog
at once (:class:`rfetch.worker.handoff.HandOff`), not counting threads whose job has run
longer than ``SPILL_AFTER`` (those are not about to take a job: a short job never waits
behind a long one while a thread sleeps). The limit follows the process's CPU use while jobs
wait: below ``GROW_BELOW`` of one CPU the threads are waiting on something else than the
GIL, and more of them help (the limit grows by one); at ``SHRINK_AT`` or more the GIL is
saturated, and one thread fewer costs nothing but hand-offs (the limit drops by one). It
starts at ``concurrency``: a new process behaves as before until it has measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable

SPILL_AFTER = 0.005
"""Seconds after which a thread running one job no longer counts as about to take the next
one: a sleeping thread is woken for the jobs waiting behind it. CPython's own switch
interval (``sys.getswitchinterval()``, 5 ms) is the time scale a thread holding the GIL is
made to let others run."""

WINDOW = 0.025
"""Seconds of CPU-use measurement between two changes of the limit."""

GROW_BELOW = 0.6
"""CPU use of the process (1.0 = one CPU) below which the limit grows by one while jobs
wait. A process running no-op jobs in one or two threads uses 0.6 to 1.0 of a CPU on the
2-core benchmark VM (the rest is waiting for Redis and for the other CPU); one whose threads
sleep in I/O uses far less."""

SHRINK_AT = 0.85
"""CPU use of the process at or above which the limit drops by one while jobs wait."""


class RunnerLimit:
    """The most threads that take waiting jobs at once (see the module's docstring). Not
    thread-safe: the manager calls it under its own lock.

    Args:
        concurrency: processor threads (the limit's start and ceiling).
        clock: monotonic clock, seconds.
        cpu: the process's CPU time, seconds (``time.process_time``: every thread).
    """

    def __init__(
        self,
        concurrency: int,
        clock: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self.concurrency = concurrency
        self.limit = concurrency
        self._clock = clock
        self._cpu = cpu
        self._since = clock()
        self._cpu_since = cpu()

    def sample(self, waiting: bool) -> int:
        """Adapt the limit once a ``WINDOW`` has passed, if jobs are ``waiting`` in the
        backlog now (otherwise the limit binds nothing and stays); returns it."""
        now = self._clock()
        elapsed = now - self._since
        if elapsed < WINDOW:
            return self.limit
        used = self._cpu()
        share = (used - self._cpu_since) / elapsed
        self._since, self._cpu_since = now, used
        if waiting:
            if share < GROW_BELOW:
                self.limit = min(self.concurrency, self.limit + 1)
            elif share >= SHRINK_AT:
                self.limit = max(1, self.limit - 1)
        return self.limit
