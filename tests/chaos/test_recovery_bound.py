"""Chaos, the default orphan-recovery bound: with every interval at its default, a job held
by a worker killed with kill -9 runs again on another worker of the cluster in under 60 s
(docs/guarantees.md: heartbeat TTL 20 s + next check up to 15 s + second look 10.5 s)."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.worker.orphan_recovery import recovery_bound
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.slow

PROMISE = 60.0
"""Seconds from the kill to the job running elsewhere (the documented bound, rounded up)."""


def test_default_settings_recover_a_killed_workers_job_within_a_minute(
    r: redis.Redis, redis_server: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    assert recovery_bound(Config()) < PROMISE
    record = tmp_path / "record"
    env = {"RFETCH_TEST_RECORD": str(record)}  # every interval at its default
    args = ["-r", "testjobs", "-c", "2", "-t", "1"]

    def starts(jid: str) -> list[int]:
        lines = record.read_text().splitlines() if record.exists() else []
        return [int(f[2]) for f in (ln.split() for ln in lines) if f[:2] == ["start", jid]]

    victim = WorkerProcess(redis_server.url, args, env, tmp_path)
    survivor: WorkerProcess | None = None
    try:
        victim.identity(r)
        jid = Client(Config(redis_url=redis_server.url), r).push("testjobs.Sleep", [300])
        wait_for(lambda: starts(jid) == [victim.pid], 15, victim.log)
        # The survivor starts while the victim lives: its start-up recovery leaves it be,
        # so only the periodic, heartbeat-based recovery can bring the job back.
        survivor = WorkerProcess(redis_server.url, args, env, tmp_path)
        survivor.identity(r)
        killed_at = time.monotonic()
        victim.kill()
        wait_for(lambda: len(starts(jid)) == 2, PROMISE, survivor.log, step=0.2)
        say(f"kill -9 to the job running elsewhere: {time.monotonic() - killed_at:.1f} s")
        assert starts(jid) == [victim.pid, survivor.pid]
        log = survivor.log()
        assert "no longer exists" not in log, "recovered by the periodic check, not at start"
    finally:
        if survivor is not None:
            survivor.signal(signal.SIGTERM)
            assert survivor.wait(15) == 0, survivor.log()
