"""Adaptive prefetch: how many jobs a worker process may hold beyond its idle threads.

Fetching ahead keeps the threads of a busy process fed with short jobs (one round trip
fetches a batch while the threads run the previous one). But a job fetched ahead of a long
job waits inside that process while another process could run it now: Celery's prefetch
trap (its docs, "Prefetch Limits"; Sidekiq has no prefetch at all). So a job is fetched
ahead only when a thread is expected to take it within ``prefetch_horizon`` seconds:

* the number fetched ahead is the number of jobs the threads that are idle, or running a
  job younger than the horizon, finish within the horizon at the mean run time of recent
  jobs, at most ``prefetch`` (all of it before the first job has finished);
* while every thread runs a job older than the horizon, nothing is fetched ahead, and a
  job already waiting goes back to the head of its queue (given back), where an idle
  process takes it at once.

A job therefore waits in a process for at most about ``prefetch_horizon`` seconds (plus the
fetcher's 50 ms tick) while another process could run it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MEAN_WEIGHT = 0.2
"""Weight of the newest run time in the exponentially weighted mean of run times."""


class PrefetchPolicy:
    """The fetch-ahead allowance of one worker process. Not thread-safe: the manager calls
    it under its own lock.

    Args:
        concurrency: processor threads.
        prefetch: the most jobs fetched ahead of the threads (``Config.prefetch_count``).
        horizon: seconds a job fetched ahead may expect to wait for a thread
            (``Config.prefetch_horizon``).
    """

    def __init__(self, concurrency: int, prefetch: int, horizon: float) -> None:
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.horizon = horizon
        self.mean: float | None = None
        """Weighted mean run time of recent jobs, seconds; None before the first."""

    def finished(self, seconds: float) -> None:
        """Note the run time of a job that just ended (seconds, monotonic clock)."""
        if self.mean is None:
            self.mean = seconds
        else:
            self.mean += MEAN_WEIGHT * (seconds - self.mean)

    def ready_soon(self, started: Iterable[float], now: float) -> int:
        """Threads that are idle or run a job started less than ``horizon`` ago.

        Args:
            started: ``time.monotonic()`` start times of the running jobs.
            now: ``time.monotonic()``.
        """
        running = 0
        young = 0
        for start in started:
            running += 1
            if now - start < self.horizon:
                young += 1
        return max(0, self.concurrency - running) + young

    def allowance(self, ready: int) -> int:
        """Jobs that may be held beyond the running ones: ``ready`` from
        :meth:`ready_soon`; 0 when no thread is ready soon."""
        if ready == 0 or self.prefetch == 0:
            return 0
        if self.mean is None:
            return self.prefetch
        expected = ready * self.horizon / max(self.mean, 1e-6)
        return min(self.prefetch, math.floor(expected))

    def give_back(self, waiting: int, ready: int) -> bool:
        """Whether jobs waiting for a thread should go back to their queue: some wait and
        no thread is ready soon."""
        return waiting > 0 and ready == 0
