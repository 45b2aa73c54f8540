"""Chaos, Redis Cluster tier (the kill -9 tier, shortened): 3,000 jobs drained by 3
workers on a 3-master + 3-replica cluster (``cluster = True``, namespace ``{chaos}``), a
random worker SIGKILLed about every 2 s (a replacement started each time), and a ``CLUSTER
FAILOVER`` of the namespace's master when half of the jobs are done.

Pass: no job lost; duplicates at most what the killed workers held (concurrency + prefetch
each); every worker still running (and stopping cleanly) after the failover.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.chaos import Evidence, Fleet
from tests.support.cluster import ClusterSet

pytestmark = pytest.mark.slow

NAMESPACE = "{chaos}"
JOBS = 3000
WORKERS = 3
CONCURRENCY = 5


def test_kill9_and_cluster_failover_lose_nothing(
    tmp_path: Path, say: Callable[[str], None]
) -> None:
    cluster = ClusterSet()
    cluster.start()
    evidence_dir, log_dir = tmp_path / "evidence", tmp_path / "logs"
    evidence_dir.mkdir()
    log_dir.mkdir()
    fleet = Fleet(
        cluster.url, log_dir, evidence_dir, ["-c", str(CONCURRENCY), "-t", "5"],
        {"RFETCH_CLUSTER": "1", "RFETCH_NAMESPACE": NAMESPACE, "RFETCH_NETWORK_TIMEOUT": "2",
         "RFETCH_POISON_MAX_RECOVERIES": "100"},
    )
    client = Client(Config(redis_url=cluster.url, cluster=True, namespace=NAMESPACE,
                           network_timeout=2.0, block_timeout=0.5, push_buffer_size=JOBS))
    evidence = Evidence(evidence_dir)
    rng = random.Random(7)
    failed_over = False
    try:
        for _ in range(WORKERS):
            fleet.start()
        jids = client.push_bulk("chaos_jobs.Work", [[rng.uniform(0, 100)] for _ in range(JOBS)])
        next_kill = time.monotonic() + 2.0
        deadline = time.monotonic() + 300
        while evidence.poll().lost(jids) and time.monotonic() < deadline:
            finished = JOBS - len(evidence.lost(jids))
            if not failed_over and finished >= JOBS // 2:
                old, new = cluster.failover(f"{NAMESPACE}:queues")
                failed_over = True
                say(f"CLUSTER FAILOVER: port {old.port} -> {new.port} ({finished} finished)")
            if time.monotonic() >= next_kill:
                victim = fleet.kill_random(rng)
                fleet.start()
                next_kill = time.monotonic() + 2.0 * rng.uniform(0.75, 1.25)
                say(f"SIGKILL worker pid {victim.pid} ({finished} finished)")
            for proc in fleet.reap_exited():
                say(f"worker pid {proc.pid} exited on its own: {proc.proc.returncode}")
                fleet.start()
            time.sleep(0.05)
        lost = evidence.lost(jids)
        bound = len(fleet.kills) * 2 * CONCURRENCY
        say(f"{JOBS} jobs, {len(fleet.kills)} kills, failover={failed_over}: {len(lost)} lost, "
            f"{evidence.duplicates()} duplicates (bound {bound})")
        assert failed_over
        assert len(fleet.kills) >= 3
        assert lost == [], f"{len(lost)} lost: {lost[:10]}\n{fleet.logs()[-3000:]}"
        assert evidence.duplicates() <= bound
        assert fleet.unexpected_exits == []
        assert fleet.stop_all() == [0] * WORKERS
    finally:
        fleet.kill_all()
        cluster.cleanup()
