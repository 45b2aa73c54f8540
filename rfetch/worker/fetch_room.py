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
"""

from __future__ import annotations

import math

SHARE_WEIGHT = 0.25
"""Weight of the newest fetch in the async share (an exponentially weighted mean)."""

SHARE_FLOOR = 0.02
"""Below this share the loop's slots are not counted as room at all."""

SYNC_SLACK = 1
"""Sync jobs a fetch for the loop may be expected to bring beyond the threads' room: so
that async jobs are still fetched while every thread is busy."""


class FetchRoom:
    """The fetch size of a process with processor threads and an event loop. Not
    thread-safe: the manager calls it under its own lock.

    Args:
        slots: the event loop's slots (``async_concurrency``; 0 without a loop).
        all_async: every registered class is async (each fetched job goes to the loop).
    """

    def __init__(self, slots: int, all_async: bool) -> None:
        self.slots = slots
        self.share = 1.0 if all_async else 0.0
        """Weighted share of async jobs among the jobs fetched recently (0 to 1)."""

    def observed(self, fetched: int, looped: int) -> None:
        """Note a fetch of ``fetched`` jobs of which ``looped`` went to the event loop."""
        if fetched <= 0:
            return
        self.share += SHARE_WEIGHT * (looped / fetched - self.share)
        if self.share < SHARE_FLOOR:
            self.share = 0.0

    @property
    def expects_async(self) -> bool:
        """Whether recent fetches brought async jobs (the loop's room then counts)."""
        return self.share > 0.0

    def plan(self, threads: int, held: int, looped: int) -> tuple[int, int]:
        """The fetch size now and the capacity it is taken from (the fetcher waits for room
        for a quarter of the capacity before it fetches again).

        Args:
            threads: room of the threads: ``concurrency`` plus the fetch-ahead allowance.
            held: jobs the process holds (running, waiting, or handed to the loop).
            looped: of those, the jobs handed to the loop.

        Returns:
            (jobs to ask for, capacity): the loop's slots are in the capacity only while
            recent fetches brought async jobs.
        """
        slots = self.slots if self.expects_async else 0
        room = self.size(threads - (held - looped), slots - looped, threads + self.slots - held)
        return room, threads + slots

    def size(self, sync_room: int, async_room: int, total_room: int) -> int:
        """Jobs to ask for now.

        Args:
            sync_room: jobs the threads can take (threads plus fetch-ahead allowance, less
                the sync jobs held).
            async_room: free slots of the event loop, less the async jobs waiting there.
            total_room: the most the process may hold, less what it holds (the bound of
                ``concurrency + async_concurrency + prefetch``).

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
