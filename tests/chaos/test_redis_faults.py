"""Chaos: faults of Redis itself, with no worker dying on its own: a frozen
Redis and a Redis killed and restarted.

* A freeze (SIGSTOP for longer than the heartbeat TTL, then SIGCONT) expires every
  heartbeat at once. Live workers beat again before the second look, so none is reaped and
  none of their jobs runs twice (Sidekiq #4611); a worker that really died during the freeze
  is reaped.
* A SIGKILL of Redis (AOF, ``appendfsync always``) and a restart on the same port: nothing
  is lost and, as no worker died, no job runs twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.chaos import ChaosPlan, Evidence, Fleet, leftovers, run_chaos
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

FREEZE_ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "1",
    "RFETCH_HEARTBEAT_TTL": "2",
    "RFETCH_ORPHAN_CHECK_INTERVAL": "0.5",
    # Commands sent during the freeze time out, so heartbeats and checks fail and resume.
    "RFETCH_NETWORK_TIMEOUT": "1.5",
}
FREEZE_SECONDS = 4.0  # twice the heartbeat TTL
JOB_MS = 7000  # every job spans the whole freeze


def test_redis_freeze_longer_than_heartbeat_ttl_reaps_no_live_worker(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    admin = own_redis.client(socket_timeout=10)
    fleet = Fleet(
        own_redis.url, tmp_path, evidence_dir, ["-c", "3", "--prefetch", "0"], FREEZE_ENV
    )
    evidence = Evidence(evidence_dir)
    try:
        live = [fleet.start() for _ in range(3)]
        identities = [p.identity(admin) for p in live]
        client = Client(Config(redis_url=own_redis.url))
        jids = client.push_bulk("chaos_jobs.Work", [[JOB_MS]] * 9)
        wait_for(lambda: len(evidence.poll().starts) == 9, 10, "the jobs to start")
        # Each live worker runs 3 jobs (prefetch 0). A fourth, idle worker is killed as the
        # freeze starts: it must be reaped after the thaw, the three others must not.
        # (Killed before the freeze rather than during it: a dead process whose lock SET is
        # still queued in a frozen Redis would hold the recovery lock for its 30 s TTL.)
        victim = fleet.start()
        victim_identity = victim.identity(admin)
        fleet.kill(victim)

        own_redis.freeze()
        frozen_at = time.monotonic()
        try:
            time.sleep(FREEZE_SECONDS)
        finally:
            own_redis.thaw()
        say(f"redis-server frozen for {time.monotonic() - frozen_at:.1f} s "
            f"(heartbeat TTL {FREEZE_ENV['RFETCH_HEARTBEAT_TTL']} s)")

        wait_for(
            lambda: len(evidence.poll().dones) == 9,
            JOB_MS / 1000 + 15,
            lambda: f"the jobs to finish: {evidence.dones}\n{fleet.logs()}",
        )
        wait_for(
            lambda: victim.pid in fleet.reaped(),
            15,
            lambda: f"the worker killed during the freeze to be reaped\n{fleet.logs()}",
        )
        time.sleep(1.0)  # a negative: a wrong reap of a live worker would show up by now
        evidence.poll()
        logs = {p.pid: p.log() for p in live}
        suspected = sum(log.count("missed its heartbeat") for log in logs.values())
        say(f"suspicions after the thaw: {suspected}; reaped: {sorted(fleet.reaped())}")

        assert sorted(fleet.reaped()) == [victim.pid]
        for identity in identities:
            assert all(f"reaped dead process {identity}" not in log for log in logs.values())
        assert all(evidence.starts[jid] == 1 and evidence.dones[jid] == 1 for jid in jids), (
            f"starts {dict(evidence.starts)} dones {dict(evidence.dones)}"
        )
        assert all(p.proc.poll() is None for p in live)
        assert sorted(fleet.stop_all()) == [0, 0, 0]
        assert leftovers(admin) == {}
        assert victim_identity not in {k.decode() for k in admin.hkeys("rfetch:identities")}
    finally:
        fleet.kill_all()
        admin.close()


def test_redis_kill9_and_restart_runs_no_job_twice(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    """Jobs that finish while Redis is down keep their pending acknowledgement: the sweep
    that follows a connection error must not push them back (it did, about 30 of 2,000,
    before the manager counted pending acknowledgements as held)."""
    plan = ChaosPlan(jobs=2000, workers=3, concurrency=5, kill_every=0, kill_redis=True)
    result = run_chaos(plan, own_redis, tmp_path, say)
    say(result.summary())

    assert result.redis_killed_at is not None
    assert result.lost == []
    assert result.leftovers == {}
    assert result.unexpected_exits == []
    assert result.exit_codes == [0, 0, 0]
    assert result.evidence.duplicates() == 0
    assert result.evidence.reruns() == 0
