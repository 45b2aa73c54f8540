"""Claim test (reliable fetch under contention): 100,000 jobs taken by 100 fetching threads across 4
worker processes (``-c 25`` each), no faults: every jid is taken exactly once.

Each job appends one ``done`` line to its process's own file outside Redis, so a job handed
to two threads (or two processes) would show up twice whatever rfetch believes.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.chaos import Evidence, Fleet, leftovers
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

JOBS = 100_000
PROCESSES = 4
THREADS = 25


def test_100k_jobs_are_each_taken_exactly_once_by_100_threads(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    fleet = Fleet(own_redis.url, tmp_path, evidence_dir, ["-c", str(THREADS)])
    evidence = Evidence(evidence_dir)
    admin = own_redis.client(socket_timeout=10)
    client = Client(Config(redis_url=own_redis.url))
    try:
        for _ in range(PROCESSES):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        started = time.monotonic()
        jids: list[str] = []
        for _ in range(JOBS // 10_000):  # the workers take jobs while the rest is pushed
            jids += client.push_bulk("chaos_jobs.Tick", [[]] * 10_000)
        wait_for(
            lambda: len(evidence.poll().dones) >= JOBS,
            150,
            lambda: f"all {JOBS} jobs to run (only {len(evidence.dones)} ran)",
            step=0.5,
        )
        elapsed = time.monotonic() - started
        wait_for(lambda: not admin.exists("queue:default"), 10, fail=False)
        codes = fleet.stop_all()
        evidence.poll()
        per_process = Counter(pid for pids in evidence.done_pids.values() for pid in pids)
        say(
            f"{len(jids)} jobs, {PROCESSES} processes x {THREADS} threads, "
            f"{elapsed:.1f} s: taken once {sum(1 for n in evidence.dones.values() if n == 1)}, "
            f"more than once {sum(1 for n in evidence.dones.values() if n > 1)}, "
            f"never {len(evidence.lost(jids))}; per process {sorted(per_process.values())}"
        )

        assert len(set(jids)) == JOBS
        assert evidence.lost(jids) == []
        assert set(evidence.dones) == set(jids)
        assert all(n == 1 for n in evidence.dones.values())
        assert len(per_process) == PROCESSES  # every process took its share of the claims
        assert codes == [0] * PROCESSES
        assert leftovers(admin) == {}
    finally:
        fleet.kill_all()
        admin.close()
