"""``rfetch worker --processes N`` with real workers, Redis and signals: a SIGKILLed child
replaced and its jobs recovered by the parent (not by orphan recovery), TERM to the parent,
USR2's rolling restart with capacity never below N-1, memory recycling; nothing lost or
run twice (evidence outside Redis)."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest
import redis

import rfetch
from rfetch.api import Api
from tests.support.redis_server import RedisServer
from tests.support.swarm import Records, children, title
from tests.support.wait import wait_for
from tests.support.workers import JOBS_DIR, WorkerProcess

ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.5",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
    "RFETCH_POLL_INITIAL_WAIT": "600",
}
"""Heartbeat TTL left at 60 s: a job back in its queue within seconds of a KILL was
recovered by the parent, not by orphan recovery."""

WORKING = re.compile(r"\[\d+ of \d+ busy\]$")
"""The title of a worker that is fetching (not quiet, not stopping, not still the
parent's title just after the fork)."""


@pytest.fixture(autouse=True)
def _jobs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(JOBS_DIR))


def _client(url: str) -> rfetch.Client:
    return rfetch.Client(rfetch.Config(redis_url=url))


def _swarm(url: str, tmp_path: Path, records: Records, *args: str) -> WorkerProcess:
    return WorkerProcess(
        url,
        ["-r", "limit_jobs", *args],
        env={**ENV, "RFETCH_TEST_RECORD": str(records.path)},
        log_dir=tmp_path,
    )


def test_a_killed_child_is_replaced_and_its_jobs_recovered_at_once(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    import limit_jobs

    records = Records(tmp_path / "records")
    worker = _swarm(redis_server.url, tmp_path, records, "--processes", "4", "-c", "2",
                    "--prefetch", "0", "-t", "10")
    try:
        wait_for(lambda: r.scard("processes") == 4, 30, worker.log)
        # The API groups the swarm: every child names the parent, one per slot.
        found = Api(rfetch.Config(redis_url=redis_server.url)).processes.all()
        assert {p.swarm for p in found} == {f"{socket.gethostname()}:{worker.pid}"}
        assert [p.slot for p in found] == [0, 1, 2, 3]
        client = _client(redis_server.url)
        jids = [limit_jobs.Work.set(client=client).perform_async(3.0) for _ in range(8)]
        wait_for(lambda: len(records.count("start")) == 8, 20, worker.log)
        victim = int(records.rows("start")[0][1])
        held = [row[0] for row in records.rows("start") if int(row[1]) == victim]
        before = {c.pid for c in children(worker.pid)}
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len({c.pid for c in children(worker.pid)} - before) == 1, 5,
                 worker.log)
        # Its jobs started again elsewhere within 5 s: pushed back by the parent.
        wait_for(lambda: all(records.count("start")[jid] == 2 for jid in held), 5,
                 worker.log)
        wait_for(lambda: set(records.count("done")) == set(jids), 20, worker.log)
        assert all(records.count("done")[jid] == 1 for jid in jids)
        assert "unexpectedly" in worker.log()
    finally:
        assert worker.stop(30) == 0


def test_term_to_the_parent_pushes_every_job_back_and_exits_0(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    import limit_jobs

    records = Records(tmp_path / "records")
    worker = _swarm(redis_server.url, tmp_path, records, "--processes", "4", "-c", "2",
                    "--prefetch", "0", "-t", "1")
    wait_for(lambda: r.scard("processes") == 4, 30, worker.log)
    client = _client(redis_server.url)
    for _ in range(8):
        limit_jobs.Work.set(client=client).perform_async(60.0)
    wait_for(lambda: len(records.count("start")) == 8, 20, worker.log)
    worker.signal(signal.SIGTERM)
    assert worker.wait(1 + 2 + 5) == 0  # -t + 2 s, and margin for a loaded machine
    assert r.llen("queue:default") == 8
    assert not list(r.scan_iter("queue:sq|*"))
    assert r.scard("processes") == 0
    assert not children(worker.pid)


@pytest.mark.slow
def test_usr2_replaces_every_child_with_capacity_never_below_n_minus_1(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    import limit_jobs

    records = Records(tmp_path / "records")
    worker = _swarm(redis_server.url, tmp_path, records, "--processes", "3", "-c", "4",
                    "-t", "10")
    try:
        wait_for(lambda: r.scard("processes") == 3, 30, worker.log)
        old = {c.pid for c in children(worker.pid)}
        client = _client(redis_server.url)
        jids = limit_jobs.Work.set(client=client).perform_bulk([[0.05]] * 600)
        wait_for(lambda: len(records.count("start")) >= 30, 20, worker.log)
        worker.signal(signal.SIGUSR2)
        capacity = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            procs = children(worker.pid)
            capacity.append(sum(1 for p in procs if WORKING.search(title(p))))
            if old.isdisjoint(p.pid for p in procs) and capacity[-1] == 3:
                break
            time.sleep(0.02)
        assert old.isdisjoint(p.pid for p in children(worker.pid)), worker.log()
        assert min(capacity) >= 2, capacity
        wait_for(lambda: set(records.count("done")) == set(jids), 60, worker.log)
        assert max(records.count("done").values()) == 1
    finally:
        assert worker.stop(30) == 0


@pytest.mark.slow
def test_a_leaking_child_is_recycled_by_memory(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    import limit_jobs

    records = Records(tmp_path / "records")
    worker = _swarm(redis_server.url, tmp_path, records, "--processes", "1", "-c", "1",
                    "--max-memory", "300", "-t", "10")
    try:
        wait_for(lambda: r.scard("processes") == 1, 30, worker.log)
        client = _client(redis_server.url)
        jids = [limit_jobs.Leak.set(client=client).perform_async() for _ in range(12)]
        wait_for(lambda: set(records.count("done")) == set(jids), 60, worker.log)
        assert max(records.count("start").values()) == 1
        assert max(records.count("done").values()) == 1
        assert "max-memory" in worker.log()
        assert len({int(row[1]) for row in records.rows("done")}) >= 2  # recycled at least once
    finally:
        assert worker.stop(30) == 0
