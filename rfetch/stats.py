"""Processed/failed counters kept in memory and flushed by the heartbeat (as Sidekiq does)."""

from __future__ import annotations

import threading
import time

from redis.client import Pipeline

from rfetch.keys import Keys

STATS_TTL = 5 * 365 * 24 * 3600
"""Lifetime of the daily counters, seconds (Sidekiq: 5 years)."""


class Stats:
    """Thread-safe counters of this process since the last flush."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self._lock = threading.Lock()
        self._processed = 0
        self._failed = 0

    def record(self, failed: bool) -> None:
        """Count one execution (a failed one counts as processed too, as in Sidekiq)."""
        with self._lock:
            self._processed += 1
            if failed:
                self._failed += 1

    def take(self) -> tuple[int, int]:
        """Counts since the last take, resetting them."""
        with self._lock:
            counts = (self._processed, self._failed)
            self._processed = self._failed = 0
        return counts

    def give_back(self, processed: int, failed: int) -> None:
        """Return counts whose flush failed, so they are flushed later."""
        with self._lock:
            self._processed += processed
            self._failed += failed

    def queue_flush(self, pipe: Pipeline, processed: int, failed: int) -> None:
        """Add the INCRBY/EXPIRE commands for these counts to ``pipe`` (UTC day keys)."""
        day = time.strftime("%Y-%m-%d", time.gmtime())
        for name, count in (("processed", processed), ("failed", failed)):
            if count:
                pipe.incrby(self.keys.stat(name), count)
                pipe.incrby(self.keys.stat(name, day), count)
                pipe.expire(self.keys.stat(name, day), STATS_TTL)
