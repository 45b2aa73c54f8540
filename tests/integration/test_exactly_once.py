"""Exactly once: 10,000 jobs pushed with ``perform_bulk`` run exactly once on two
real ``rfetch worker`` processes (``-c 10`` each), and Redis ends consistent.

The evidence of execution is kept outside Redis (``RFETCH_TEST_RECORD``, one line per run
appended by ``testjobs.Noop``), so a job run twice, or not at all, shows up whatever the
worker wrote to Redis.
"""

from __future__ import annotations

import importlib
import signal
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import cast

import pytest
import redis

import rfetch
from rfetch.push.client import DEFAULT
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import JOBS_DIR, WorkerProcess

JOBS = 10_000

WORKER_ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.5",
    "RFETCH_BLOCK_TIMEOUT": "1",
    "RFETCH_POLL_INTERVAL_AVERAGE": "1",
}


@pytest.fixture
def testjobs(redis_server: RedisServer, r: redis.Redis) -> Iterator[ModuleType]:
    """The workers' own job module, imported as they import it (so ``Noop`` is named
    ``testjobs.Noop``), with the process-wide client pointed at the test server."""
    sys.path.insert(0, str(JOBS_DIR))
    try:
        module = importlib.import_module("testjobs")
    finally:
        sys.path.remove(str(JOBS_DIR))
    rfetch.configure(redis_url=redis_server.url)
    yield module
    DEFAULT.set(None)


def private_lists(r: redis.Redis) -> dict[bytes, int]:
    """Every ``queue:sq|*`` private list (found with SCAN) and its length."""
    return {key: int(r.llen(key)) for key in r.scan_iter(match="queue:sq|*", count=1000)}


def test_ten_thousand_jobs_run_exactly_once_on_two_workers(
    redis_server: RedisServer, r: redis.Redis, testjobs: ModuleType, tmp_path: Path
) -> None:
    record = tmp_path / "record.txt"
    workers = [
        WorkerProcess(
            redis_server.url,
            ["-r", "testjobs", "-c", "10", "-t", "5"],
            env={**WORKER_ENV, "RFETCH_TEST_RECORD": str(record)},
            log_dir=tmp_path,
        )
        for _ in range(2)
    ]
    try:
        identities = [w.identity(r) for w in workers]
        jids = testjobs.Noop.perform_bulk([[n] for n in range(JOBS)])
        assert len(set(jids)) == JOBS

        def runs() -> list[str]:
            return record.read_text().splitlines() if record.exists() else []

        wait_for(lambda: len(runs()) >= JOBS, 60, f"{JOBS} recorded runs")
        for w in workers:
            w.signal(signal.SIGTERM)
        for w in workers:
            assert w.wait(15) == 0, w.log()
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.kill()

    lines = [line.split() for line in runs()]
    assert {fields[0] for fields in lines} == {"done"}
    counts = Counter(fields[1] for fields in lines)
    twice = [jid for jid, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} jobs ran more than once, e.g. {twice[:5]}"
    assert set(counts) == set(jids)
    # Both processes took part (each fetches at most 20 jobs per round trip).
    by_pid = Counter(fields[2] for fields in lines)
    assert set(by_pid) == {str(w.pid) for w in workers}, by_pid

    assert r.llen("queue:default") == 0
    assert private_lists(r) == {}
    assert int(r.get("stat:processed") or 0) == JOBS
    assert int(r.get("stat:failed") or 0) == 0
    daily = [int(r.get(key) or 0) for key in r.scan_iter(match="stat:processed:*")]
    assert sum(daily) == JOBS
    members = {m.decode() for m in cast("set[bytes]", r.smembers("processes"))}
    assert not members & set(identities)
    for ident in identities:
        assert not r.exists(ident, f"{ident}:work")
