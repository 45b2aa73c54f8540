"""Ordering keys with real ``rfetch worker`` processes.

Two worker processes (``-r ordered_jobs``, short heartbeat and recovery settings as the
chaos suite uses) run jobs of several keys; one job per key fails once (its retry comes 1 s
later and must block the key meanwhile), and the worker running a long job is SIGKILLed in
the middle of it (a replacement is started). From the jobs' own evidence: for every key the
first successful runs follow enqueue order, no two runs of a key overlap in time, and no
job is lost.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.ordering_check import check_order, read_runs
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import FAST_ENV

pytestmark = pytest.mark.slow


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    return WorkerDefaults(args=("-r", "ordered_jobs", "-c", "4"), env=FAST_ENV)


def test_keys_run_in_order_without_overlap_across_processes_with_retry_and_kill(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, start_worker: StartWorker
) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    chaos_dir = {"RFETCH_CHAOS_DIR": str(evidence)}
    client = Client(Config(redis_url=redis_server.url), r)
    pushed: dict[str, list[str]] = {}
    # The long job opens key "slow"; jobs of 5 other keys are interleaved, one of each fails once.
    for seq in range(12):
        for k in ("slow", "k1", "k2", "k3", "k4", "k5"):
            ms = 3000 if (k == "slow" and seq == 0) else 20
            fail = k != "slow" and seq == 3
            jid = client.push("ordered_jobs.Ordered", [k, seq, ms, fail], {"key": k})
            assert jid is not None
            pushed.setdefault(k, []).append(jid)
    workers = [start_worker(env=chaos_dir, ready=False) for _ in range(2)]
    kills: dict[int, float] = {}
    try:
        slow_jid = pushed["slow"][0]

        def slow_started() -> bool:
            return any(run.jid == slow_jid for run in read_runs(evidence))

        wait_for(slow_started, 30, "the long job to start")
        runner = next(run.pid for run in read_runs(evidence) if run.jid == slow_jid)
        victim = next(w for w in workers if w.pid == runner)
        kills[victim.pid] = time.time()
        victim.kill()
        workers.remove(victim)
        workers.append(start_worker(env=chaos_dir, ready=False))

        every = [jid for jids in pushed.values() for jid in jids]

        def all_done() -> bool:
            done = {run.jid for run in read_runs(evidence) if run.outcome == "done"}
            return all(jid in done for jid in every)

        wait_for(all_done, 90, "every job to succeed", step=0.2)
    finally:
        for w in workers:
            w.signal(signal.SIGTERM)
        for w in workers:
            w.wait(30)
    report = check_order(read_runs(evidence), pushed, kills)
    assert report.ok, (report.summary(), report.out_of_order, report.overlaps[:5], report.lost[:5])
    assert report.failed_runs == 5  # one per key k1..k5, each retried
    assert report.killed_runs >= 1  # the long job was cut by the SIGKILL and ran again
    # The gate is clean: no holder, no waiting job; a lease left by a heartbeat that raced
    # an ack is stale (its jid holds nothing) and is dropped by the orphan check later.
    assert r.hlen("rfetch:key-holders:default") == 0
    assert list(r.scan_iter(match="rfetch:key:*")) == []
