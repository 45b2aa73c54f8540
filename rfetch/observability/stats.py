"""Execution counters kept in memory and flushed by the heartbeat (as Sidekiq does).

Besides Sidekiq's ``stat:processed`` / ``stat:failed`` (and their daily keys), each flush
adds per-class counts and a run-time histogram to the hash of the current UTC minute,
``rfetch:metrics:<YYYYmmddHHMM>`` (kept ``METRICS_TTL``), which ``rfetch.api`` reads for
per-class processed/failed and run-time percentiles over the last hour; the same fields are
also added to ``rfetch:metrics:totals``, which never expires, for Prometheus counters.
Nothing is written per job: the cost is one pipelined flush per heartbeat, and none while
idle.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field

from redis.client import Pipeline

from rfetch.store.keys import Keys

STATS_TTL = 5 * 365 * 24 * 3600
"""Lifetime of the daily counters, seconds (Sidekiq: 5 years)."""

METRICS_TTL = 2 * 3600
"""Lifetime of a per-minute metrics hash, seconds."""

BUCKETS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000,
              120_000, 300_000, 600_000, 1_800_000, 3_600_000)
"""Upper bounds (milliseconds) of the run-time histogram, 1 ms to 1 h; one more bucket holds
the rest. Field ``<class>|b<i>`` counts runs of at most ``BUCKETS_MS[i]`` ms (and above the
previous)."""

TOTALS = "totals"
"""``rfetch:metrics:totals``: the per-class fields of the minute hashes, summed since the
first flush and never expired (what Prometheus counters need: they only grow)."""


@dataclass
class ClassCounts:
    """Executions of one job class since the last flush."""

    processed: int = 0
    failed: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_MS) + 1))

    def merge(self, other: ClassCounts) -> None:
        self.processed += other.processed
        self.failed += other.failed
        for i, count in enumerate(other.buckets):
            self.buckets[i] += count


@dataclass
class Snapshot:
    """Counts taken for one flush."""

    processed: int = 0
    failed: int = 0
    classes: dict[str, ClassCounts] = field(default_factory=dict)


class Stats:
    """Thread-safe counters of this process since the last flush."""

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self._lock = threading.Lock()
        self._now = Snapshot()
        self._lifetime = 0

    def record(self, job_class: str, failed: bool, elapsed_ms: float) -> None:
        """Count one execution (a failed one counts as processed too, as in Sidekiq).

        Args:
            job_class: the payload's class name.
            failed: whether it raised.
            elapsed_ms: its run time in milliseconds.
        """
        bucket = bisect.bisect_left(BUCKETS_MS, elapsed_ms)
        with self._lock:
            self._lifetime += 1
            snap = self._now
            snap.processed += 1
            counts = snap.classes.get(job_class)
            if counts is None:
                counts = snap.classes[job_class] = ClassCounts()
            counts.processed += 1
            counts.buckets[bucket] += 1
            if failed:
                snap.failed += 1
                counts.failed += 1

    @property
    def lifetime(self) -> int:
        """Jobs this process has run since it started (``--max-jobs``)."""
        with self._lock:
            return self._lifetime

    def take(self) -> Snapshot:
        """Counts since the last take, resetting them."""
        with self._lock:
            snap, self._now = self._now, Snapshot()
        return snap

    def give_back(self, snap: Snapshot) -> None:
        """Return counts whose flush failed, so they are flushed later."""
        with self._lock:
            self._now.processed += snap.processed
            self._now.failed += snap.failed
            for name, counts in snap.classes.items():
                self._now.classes.setdefault(name, ClassCounts()).merge(counts)

    def queue_flush(self, pipe: Pipeline, snap: Snapshot) -> None:
        """Add the commands writing ``snap`` to ``pipe`` (UTC day and minute keys)."""
        now = time.gmtime()
        day = time.strftime("%Y-%m-%d", now)
        for name, count in (("processed", snap.processed), ("failed", snap.failed)):
            if count:
                pipe.incrby(self.keys.stat(name), count)
                pipe.incrby(self.keys.stat(name, day), count)
                pipe.expire(self.keys.stat(name, day), STATS_TTL)
        if not snap.classes:
            return
        key = self.keys.metrics(time.strftime("%Y%m%d%H%M", now))
        for target in (key, self.keys.metrics(TOTALS)):
            for job_class, counts in snap.classes.items():
                pipe.hincrby(target, f"{job_class}|p", counts.processed)
                if counts.failed:
                    pipe.hincrby(target, f"{job_class}|f", counts.failed)
                for i, n in enumerate(counts.buckets):
                    if n:
                        pipe.hincrby(target, f"{job_class}|b{i}", n)
        pipe.expire(key, METRICS_TTL)
