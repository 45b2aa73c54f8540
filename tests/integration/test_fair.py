"""Fair scheduling across tenants: deficit round robin in fetch.lua, against a
real redis-server, plus one real-process test of the starvation case "A pushes 5,000, then B
pushes 1", counted from the jobs' own evidence."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import rfetch
from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError
from rfetch.push.client import Client
from tests.support.gate_worker import FAIL, RAN, Step, Worker, holder, make_due, running
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess

pytestmark = pytest.mark.usefixtures("clear_runs")


class PerTenant(rfetch.Job):
    queue = "q"

    def tenant(self, account: str, *rest: Any) -> str | None:
        return account

    def perform(self, *args: Any) -> None:
        RAN.append(("PerTenant", list(args)))


def push(w: Worker, tenant: str | None, *args: Any, **opts: Any) -> str:
    options = {} if tenant is None else {"tenant": tenant}
    jid = Step.set(client=w.client, **options, **opts).perform_async(*args)
    assert jid is not None
    return jid


def fetch_order(w: Worker, batch: int = 1) -> list[Any]:
    """First argument of every job, in the order fetched, ``batch`` per fetch call."""
    order: list[Any] = []
    while units := w.fetch.retrieve_work(batch):
        order += [json.loads(u.raw)["args"][0] for u in units]
    return order


def assert_ring_clean(r: redis.Redis) -> None:
    assert r.exists("rfetch:fair:q", "rfetch:fair-credits:q") == 0
    assert list(r.scan_iter(match="rfetch:fair:q|*")) == []


def test_tenants_are_served_round_robin_fifo_within_each(worker: Worker, r: redis.Redis) -> None:
    for i in range(5):
        push(worker, "A", f"A{i}")
    push(worker, "B", "B0")
    push(worker, "C", "C0")
    push(worker, "C", "C1")
    assert r.lrange("rfetch:fair:q", 0, -1) == [b"C", b"B", b"A"]  # head is the right end
    assert r.llen("queue:q") == 0  # tenant jobs are not in the public queue
    assert fetch_order(worker, batch=3) == ["A0", "B0", "C0", "A1", "C1", "A2", "A3", "A4"]
    assert_ring_clean(r)


def test_weights_give_a_tenant_more_jobs_per_turn(worker: Worker, r: redis.Redis) -> None:
    r.hset("rfetch:fair-weights:q", "A", 3)
    for i in range(6):
        push(worker, "A", f"A{i}")
    for i in range(3):
        push(worker, "B", f"B{i}")
    assert fetch_order(worker) == ["A0", "A1", "A2", "B0", "A3", "A4", "A5", "B1", "B2"]
    assert_ring_clean(r)


def test_plain_and_tenant_jobs_of_one_queue_alternate(worker: Worker, r: redis.Redis) -> None:
    for i in range(3):
        push(worker, None, f"P{i}")
    for i in range(3):
        push(worker, "A", f"A{i}")
    worker.fetch.refresh_fair(force=True)
    assert fetch_order(worker, batch=10) == ["A0", "P0", "A1", "P1", "A2", "P2"]


def test_push_back_returns_a_tenant_job_to_the_head_and_the_ring(
    worker: Worker, r: redis.Redis
) -> None:
    push(worker, "A", "A0")
    push(worker, "B", "B0")
    push(worker, "B", "B1")
    units = worker.fetch.retrieve_work(1)  # A0: A leaves the ring
    assert r.lrange("rfetch:fair:q", 0, -1) == [b"B"]
    assert worker.fetch.requeue(units) == 1
    assert r.lrange("rfetch:fair:q", 0, -1) == [b"B", b"A"]  # back at the head
    assert fetch_order(worker) == ["A0", "B0", "B1"]
    assert_ring_clean(r)


def test_orphan_recovery_returns_tenant_jobs_to_their_tenant(
    cfg: Config, worker: Worker, r: redis.Redis
) -> None:
    push(worker, "A", "A0")
    push(worker, "A", "A1")
    worker.fetch.retrieve_work(2)
    assert r.exists("rfetch:fair:q") == 0
    worker.other_process().reap(worker.identity, ["q"])
    assert fetch_order(worker) == ["A0", "A1"]


def test_retry_of_a_tenant_job_goes_back_to_its_tenant(worker: Worker, r: redis.Redis) -> None:
    FAIL.add("A0")
    push(worker, "A", "A0")
    worker.work_one()
    assert r.zcard("retry") == 1 and r.exists("rfetch:fair:q") == 0
    make_due(r, "retry")
    assert worker.poller.enqueue_due() == 1
    assert r.lrange("rfetch:fair:q", 0, -1) == [b"A"]
    assert r.llen("rfetch:fair:q|A") == 1 and r.llen("queue:q") == 0


def test_ordering_keys_compose_with_tenants(worker: Worker, r: redis.Redis) -> None:
    first = push(worker, "A", "k0", key="k")
    push(worker, "A", "k1", key="k")
    push(worker, "B", "B0")
    assert holder(r, "k") == first and r.llen("rfetch:fair:q|A") == 1
    assert worker.drain() == 3
    assert [args[0] for _, args in RAN] == ["k0", "B0", "k1"]
    assert holder(r, "k") is None
    assert_ring_clean(r)


def test_class_level_tenant(worker: Worker, r: redis.Redis) -> None:
    PerTenant.set(client=worker.client).perform_bulk([["a", 1], ["a", 2], ["b", 3]])
    assert r.llen("rfetch:fair:q|a") == 2 and r.llen("rfetch:fair:q|b") == 1


@pytest.mark.parametrize("tenant", ["", "a|b", 5])
def test_bad_tenant_raises_and_writes_nothing(worker: Worker, r: redis.Redis, tenant: Any) -> None:
    with pytest.raises(ConfigError, match=re.escape("tenant must be a non-empty string")):
        Step.set(client=worker.client, tenant=tenant).perform_async(1)
    assert r.dbsize() == 0


def test_one_job_of_b_starts_within_a_round_after_5000_of_a(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """The starvation case: B's job starts within (active tenants x concurrency) job starts
    after it is pushed, plus the jobs already fetched when it was pushed, counted from the
    start times the jobs recorded (A's backlog is 5,000)."""
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    client = Client(Config(redis_url=redis_server.url), r)
    concurrency = 4
    worker = WorkerProcess(
        redis_server.url,
        ["-r", "chaos_jobs", "-c", str(concurrency), "--prefetch", "0"],
        env={**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence)},
        log_dir=tmp_path,
    )
    try:
        client.push_bulk("chaos_jobs.Work", [[2]] * 5000, {"tenant": "A"})
        starts: list[tuple[float, str]] = []

        def read_starts() -> list[tuple[float, str]]:
            found = []
            for path in evidence.glob("*.log"):
                for line in path.read_text().splitlines():
                    parts = line.split(" ")
                    if parts[0] == "start":
                        found.append((float(parts[3]), parts[1]))
            return sorted(found)

        wait_for(lambda: len(read_starts()) >= 100, 60, "A's jobs to be running")
        pushed_at = time.time()
        b_jid = client.push("chaos_jobs.Work", [2], {"tenant": "B"})
        wait_for(lambda: any(j == b_jid for _, j in read_starts()), 60, "B's job to start")
        starts = read_starts()
    finally:
        worker.signal(signal.SIGTERM)
        worker.wait(30)
    b_start = next(t for t, j in starts if j == b_jid)
    before_b = [j for t, j in starts if pushed_at <= t < b_start]
    assert len(starts) < 5001  # B did not wait for A's backlog
    # One round is (active tenants x concurrency) = 2 x 4 fetches; the jobs fetched just
    # before the push but started after it (at most one per thread) also count here.
    assert len(before_b) <= 3 * concurrency, f"{len(before_b)} starts before B's job"


def test_an_idle_look_sees_the_first_tenant_job_of_a_queue_not_yet_fair(
    cfg: Config, r: redis.Redis
) -> None:
    """The idle EXISTS covers every queue's tenant ring, not only the queues known to be
    fair, so a worker that looks up the fair queues rarely while idle still wakes up."""
    two = cfg.replace(queues=[QueueSpec("other"), QueueSpec("q")])
    with running(two) as w:
        w.fetch.refresh_fair(force=True)
        assert w.fetch.fair == frozenset()
        assert not w.fetch.any_waiting()
        push(w, "A", "A0")
        assert w.fetch.fair == frozenset(), "not looked up again yet"
        assert w.fetch.any_waiting()
        assert not w.fetch.any_waiting(exclude=["q"])
