"""The poller that moves due jobs from the scheduled and retry sets to their queues.

The move is one Lua call (``enqueue_due.lua``) per up to 100 jobs, decided by Redis's clock.
The interval follows Sidekiq: the whole cluster polls on average every
``poll_interval_average`` seconds (default: 5 s per live process, so ``processes x 5``
between polls of one process), each wait randomised to [0.5x, 1.5x], and the first poll
after 10 + rand(5) s.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from rfetch.guard import ThreadGuard
from rfetch.worker.context import WorkerContext

log = logging.getLogger("rfetch.scheduled")

BATCH = 100
"""Jobs moved per Lua call."""

PER_PROCESS_INTERVAL = 5.0
"""Sidekiq's ``average_scheduled_poll_interval``, seconds."""

PROCESS_COUNT_TTL = 60.0
"""Seconds a process count (SCARD processes) is used before it is read again: counting on
every poll was a tenth of an idle worker's Redis commands."""


class Poller:
    """Enqueues due scheduled jobs and retries.

    Args:
        context: poll interval settings, the Lua scripts (with the client and key names
            they use) and the error reporter.
        rng: random source for the jitter.
    """

    def __init__(self, context: WorkerContext, rng: random.Random | None = None) -> None:
        commands = self.commands = context.commands
        report = self.report = context.report
        self.config = context.config
        self.rng = rng or random.Random()
        self.guard = ThreadGuard("scheduled poller", log, report, commands.redis, 1.0, 30.0)
        self._count = 1
        self._counted_at = float("-inf")

    def enqueue_due(self) -> int:
        """Move every due job of both sets now; returns how many were moved. A due job
        one of whose keys on the way holds another Redis type stays in its set (logged) and
        the jobs behind it go on.

        One EXISTS first: when both sets are empty a poll costs one command."""
        moved_total = 0
        keys, redis = self.commands.keys, self.commands.redis
        if not redis.exists(keys.schedule, keys.retry):
            return 0
        for zset in (keys.schedule, keys.retry):
            while True:
                reply = self.commands.enqueue_due(zset, BATCH)
                moved_total += reply.moved
                if reply.left:
                    log.error(
                        "%d due job(s) of %s stay in the set, not enqueued: %s",
                        len(reply.left),
                        zset,
                        reply.left[0],
                    )
                if reply.moved < BATCH:
                    break
        return moved_total

    def interval(self) -> float:
        """Seconds until the next poll: the average, randomised to [0.5x, 1.5x]. The process
        count behind Sidekiq's average is read at most every ``PROCESS_COUNT_TTL`` seconds."""
        average = self.config.poll_interval_average
        if average is None:
            now = time.monotonic()
            if now - self._counted_at >= PROCESS_COUNT_TTL:
                processes = self.commands.keys.processes
                self._count = int(self.commands.redis.scard(processes)) or 1
                self._counted_at = now
            average = self._count * PER_PROCESS_INTERVAL
        return average * self.rng.random() + average / 2

    def initial_wait(self) -> float:
        """Seconds before the first poll (Sidekiq: 10 + rand(5))."""
        if self.config.poll_initial_wait is not None:
            return self.config.poll_initial_wait
        return 10.0 + self.rng.random() * 5.0

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set. Any error is logged once per kind, and the next
        poll comes after a back-off (1 s doubling to 30 s); no error ends the loop."""
        if stop.wait(self.initial_wait()):
            return
        while True:
            try:
                moved = self.enqueue_due()
                if moved:
                    log.debug("enqueued %d due job(s)", moved)
                wait = self.interval()
            except Exception as exc:
                wait = self.guard.failed(exc)
            else:
                self.guard.succeeded()
            if stop.wait(wait):
                return
