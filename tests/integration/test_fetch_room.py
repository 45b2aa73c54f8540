"""Fetch room of a worker whose ``-r`` modules define async job classes, with real
``rfetch worker`` processes: the event loop's slots are no room for sync jobs, so a worker
that loads one async class and drains only sync jobs holds what its threads can run, as a
sync-only worker does, and does not fetch and give back jobs in a loop."""

from __future__ import annotations

from pathlib import Path

import redis

from tests.support.hoard import sample_drain
from tests.support.redis_server import RedisServer

CONCURRENCY = 3
PREFETCH = 3
"""``prefetch`` defaults to ``concurrency``."""

JOB_SECONDS = 0.2
"""Longer than the prefetch horizon (0.1 s): jobs fetched ahead are given back when no
thread is ready soon, so a worker that fetches too much gives back too much."""


def test_a_worker_with_one_async_class_holds_no_more_sync_jobs_than_a_sync_worker(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    base = ["-c", str(CONCURRENCY), "-r", "testjobs"]
    sync_only = sample_drain(redis_server.url, r, base, tmp_path, 300, 6.0, JOB_SECONDS)
    mixed = sample_drain(
        redis_server.url, r, [*base, "-r", "async_jobs"], tmp_path, 300, 6.0, JOB_SECONDS
    )
    assert sync_only.samples > 0 and mixed.samples > 0
    assert mixed.ran > 0
    # Its private list holds at most concurrency + prefetch jobs (plus a finished job or
    # two whose acknowledgement rides on the next fetch), never the loop's 100 slots.
    bound = CONCURRENCY + PREFETCH + 2
    assert mixed.max_held <= bound, (mixed, sync_only)
    # What it gives back is what a sync-only worker gives back (jobs fetched ahead whose
    # thread is not ready soon), not a fetch-and-give-back loop (thousands in 6 s).
    assert mixed.given_back <= 3 * sync_only.given_back + 3 * mixed.ran + 50, (
        mixed,
        sync_only,
    )
