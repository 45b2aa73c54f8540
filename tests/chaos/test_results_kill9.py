"""Chaos: recorded results under kill -9. 1,000 ``store_result`` jobs; the worker is
SIGKILLed mid-run; at that moment every job is in exactly one of: recorded (acknowledged
with its result), its private list (fetched, not acknowledged) or its queue, and every
recorded job finished its ``perform`` (evidence written outside Redis by the job itself).
A new worker then recovers the rest; each of the 1,000 results is read back with
``rfetch.result`` and each was recorded once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.push.client import Client
from tests.jobs.chaos_jobs import Square
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess

pytestmark = pytest.mark.slow

JOBS = 1000


def jids_in(r: redis.Redis, pattern: str) -> set[str]:
    return {json.loads(raw)["jid"] for key in r.scan_iter(pattern) for raw in r.lrange(key, 0, -1)}


def finished(directory: Path) -> set[str]:
    return {
        line.split(" ")[1]
        for path in directory.glob("*.log")
        for line in path.read_text().splitlines()
        if line.startswith("done ")
    }


def test_only_acknowledged_jobs_have_results_after_kill9(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    r = own_redis.client()
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    env = {**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence)}
    client = Client(Config(redis_url=own_redis.url))
    jids = Square.set(client=client).perform_bulk([[n, 5] for n in range(JOBS)])
    expected = {jid: n * n for n, jid in enumerate(jids)}
    first = WorkerProcess(own_redis.url, ["-r", "chaos_jobs", "-c", "5"], env, tmp_path)
    wait_for(lambda: int(r.get("rfetch:results-stored") or 0) >= JOBS // 3, 60,
             lambda: f"a third of the results:\n{first.log()}")
    first.kill()
    recorded = {key.decode().rsplit(":", 1)[1] for key in r.scan_iter("rfetch:result:*")}
    held = jids_in(r, "queue:sq|*")
    queued = jids_in(r, "queue:default")
    ran = finished(evidence)
    say(f"at the kill: {len(recorded)} recorded, {len(held)} held, {len(queued)} queued, "
        f"{len(ran - recorded)} finished but not acknowledged")
    assert recorded.isdisjoint(held) and recorded.isdisjoint(queued) and held.isdisjoint(queued)
    assert recorded | held | queued == set(jids)
    assert recorded <= ran, "a result exists for a job that never finished"
    assert int(r.get("rfetch:results-stored") or 0) == len(recorded)

    second = WorkerProcess(own_redis.url, ["-r", "chaos_jobs", "-c", "5"], env, tmp_path)
    try:
        wait_for(lambda: int(r.get("rfetch:results-stored") or 0) >= JOBS, 120,
                 lambda: f"every result:\n{second.log()}")
        values = {jid: rfetch.result(jid, 5, client) for jid in jids}
    finally:
        second.stop()
    assert values == expected
    assert int(r.get("rfetch:results-stored") or 0) == JOBS  # each recorded once
    assert jids_in(r, "queue:*") == set()
