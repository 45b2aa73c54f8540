"""How many jobs the fetcher asks for when the process runs both sync and async jobs.

A sync job can only use a free processor thread and an async job only a free slot of the
event loop, but the fetcher learns a job's class only after the fetch (the payload's
``class``, looked up in the registry). Counting the loop's slots as room for any job made
a worker of three threads whose ``-r`` modules define a single async class hold about 100
sync jobs, and an idle loop counted as "starving", so the fetcher fetched jobs no thread
could start and gave them back in a loop.

:class:`FetchRoom` asks for what can run: room for the threads (``concurrency`` plus the
fetch-ahead allowance, less the sync jobs held), plus room for the loop in proportion to
the share of async jobs among recent fetches. A worker that has fetched only sync jobs
asks only for thread room; one that fetches only async jobs asks for both. Sync jobs
fetched beyond the threads' room (a mixed queue) wait for a thread, and go back to their
queue only when no thread is ready soon (:meth:`PrefetchPolicy.give_back`).

Two ways a mixed queue starved a kind of room that sat idle:

* **Probe**: with every thread busy and a share of 0, the loop's room never counted, so no
  fetch happened to learn that async jobs were queued, and an idle loop waited for a
  thread to free. While the loop has a free slot, the share is 0 and the threads have no
  room, the fetcher now probes: it reads the next job of each queue (one round trip,
  :func:`rfetch.worker.head_peek.async_next`) and, when one is async, fetches one job. An
  async job raises the share (the loop's room then counts); a sync job (another queue
  came first in the fetch order, or a fair or capped queue, whose jobs cannot be read
  ahead) waits for a thread or goes back to its queue by the rule above, within
  ``concurrency + prefetch`` sync jobs held. Probes back off (``PROBE_FIRST`` doubling to
  ``PROBE_MAX`` seconds) until a fetch brings an async job, so a busy sync-only workload
  costs one look per ``PROBE_MAX`` seconds, and no fetch/give-back loop can start.
* **Bound**: async jobs waiting for a slot counted against the threads' fetch-ahead
  allowance (``concurrency + allowance + async_concurrency`` in all), which is 0 once the
  threads' recent jobs were long: with the loop full and two async jobs at the head of the
  queue, the sync jobs behind them were never reached while the threads sat idle. The
  total is now the documented bound, ``concurrency + prefetch + async_concurrency``, and
  async jobs waiting for a slot do not take thread room: the fetcher goes on through them
  up to that bound, so sync jobs behind them start on idle threads. Sync jobs behind more
  async jobs than the bound leaves room for wait until a slot frees (or another process
  takes them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SHARE_WEIGHT = 0.25
"""Weight of the newest fetch in the async share (an exponentially weighted mean)."""

SHARE_FLOOR = 0.02
"""Below this share the loop's slots are not counted as room at all."""

SYNC_SLACK = 1
"""Sync jobs a fetch for the loop may be expected to bring beyond the threads' room: so
that async jobs are still fetched while every thread is busy."""

PROBE_FIRST = 0.5
"""Seconds between the first probes for async jobs (see the module's docstring)."""

PROBE_MAX = 5.0
"""The most seconds between two probes: an async job queued while every thread is busy
and the share is 0 waits at most this long (plus a fetcher tick) for the loop."""


@dataclass(frozen=True)
class Plan:
    """What the fetcher does next.

    Attributes:
        room: jobs to ask for (1 for a probe).
        low_water: held jobs at or below which a job's end wakes the fetcher (room for a
            batch: a quarter of the capacity).
        eager: fetch now even without room for a batch (no sync job waits for a thread,
            the loop is idle while async jobs come, or a probe).
        probe: this fetch is a probe: one job while the share predicts sync jobs only.
    """

    room: int
    low_water: int
    eager: bool
    probe: bool = False


class FetchRoom:
    """The fetch size of a process with processor threads and an event loop. Not
    thread-safe: the manager calls it under its own lock.

    Args:
        concurrency: processor threads.
        prefetch: jobs held beyond the running ones (``Config.prefetch_count``).
        slots: the event loop's slots (``async_concurrency``; 0 without a loop).
        all_async: every registered class is async (each fetched job goes to the loop).
    """

    def __init__(self, concurrency: int, prefetch: int, slots: int, all_async: bool) -> None:
        self.slots = slots
        self.sync_bound = concurrency + prefetch
        """The most sync jobs held (running or waiting for a thread)."""
        self.bound = self.sync_bound + slots
        """The most jobs held: ``concurrency + prefetch + async_concurrency``."""
        self.share = 1.0 if all_async else 0.0
        """Weighted share of async jobs among the jobs fetched recently (0 to 1)."""
        self._probe_delay = PROBE_FIRST
        self._next_probe = -math.inf

    def observed(self, fetched: int, looped: int) -> None:
        """Note a fetch of ``fetched`` jobs of which ``looped`` went to the event loop; an
        async job ends the probes' back-off."""
        if fetched <= 0:
            return
        if looped > 0:
            self._probe_delay = PROBE_FIRST
        self.share += SHARE_WEIGHT * (looped / fetched - self.share)
        if self.share < SHARE_FLOOR:
            self.share = 0.0

    @property
    def expects_async(self) -> bool:
        """Whether recent fetches brought async jobs (the loop's room then counts)."""
        return self.share > 0.0

    def plan(
        self, threads: int, held: int, looped: int, waiting: int, loop_idle: bool, now: float
    ) -> Plan:
        """The next fetch. A plan with ``probe`` set counts as sent (the back-off starts):
        the manager sends every plan whose room is positive and that is eager.

        Args:
            threads: room of the threads: ``concurrency`` plus the fetch-ahead allowance.
            held: jobs the process holds (running, waiting, or handed to the loop).
            looped: of those, the jobs handed to the loop (running or waiting for a slot).
            waiting: sync jobs held and not started.
            loop_idle: no async job runs or waits.
            now: ``time.monotonic()``.

        Returns:
            The plan: the loop's slots are in the capacity only while recent fetches
            brought async jobs.
        """
        capacity = threads + (self.slots if self.expects_async else 0)
        low_water = capacity - max(1, capacity // 4)
        sync_held = held - looped
        total_room = self.bound - held
        room = self.size(threads - sync_held, self.slots - looped, total_room)
        if room <= 0 and total_room > 0 and self._probe_due(sync_held, looped, now):
            return Plan(1, low_water, eager=True, probe=True)
        starving = waiting == 0 or (self.expects_async and loop_idle)
        return Plan(room, low_water, starving or room >= capacity - low_water)

    def _probe_due(self, sync_held: int, looped: int, now: float) -> bool:
        """Whether to probe now: the loop has a free slot the share does not count, a sync
        job the probe may bring stays within ``concurrency + prefetch``, and the back-off
        has passed (it then doubles)."""
        if self.expects_async or looped >= self.slots or sync_held >= self.sync_bound:
            return False
        if now < self._next_probe:
            return False
        self._next_probe = now + self._probe_delay
        self._probe_delay = min(self._probe_delay * 2, PROBE_MAX)
        return True

    def size(self, sync_room: int, async_room: int, total_room: int) -> int:
        """Jobs to ask for now.

        Args:
            sync_room: jobs the threads can take (threads plus fetch-ahead allowance, less
                the sync jobs held).
            async_room: free slots of the event loop, less the async jobs waiting there.
            total_room: the most the process may hold, less what it holds (the bound of
                ``concurrency + prefetch + async_concurrency``; async jobs waiting for a
                slot count here, not against ``sync_room``).

        Returns:
            ``sync_room`` when no async job was fetched recently; otherwise as many as the
            async share fills the loop's room with, while the sync jobs expected among them
            exceed the threads' room by at most ``SYNC_SLACK``.
        """
        share = self.share
        wanted = max(sync_room, 0)
        if share > 0.0 and async_room > 0:
            by_loop = math.floor(async_room / share)
            by_threads = (
                math.inf if share >= 1.0 else math.floor((wanted + SYNC_SLACK) / (1 - share))
            )
            wanted = max(wanted, int(min(by_loop, by_threads)))
        return max(0, min(wanted, total_room))
