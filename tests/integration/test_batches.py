"""Batches on real ``rfetch worker`` processes (Sidekiq Pro semantics): callbacks fire once,
the counters match the evidence written outside Redis, child batches, adding to a running
batch, a raising ``jobs()`` block, death, expiry.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import redis

import rfetch
from rfetch.push.client import DEFAULT
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, JOBS_DIR, WorkerProcess


@pytest.fixture
def bj(redis_server: RedisServer, r: redis.Redis) -> Iterator[ModuleType]:
    """The workers' job module, imported under their name (``batch_jobs.Item``), with the
    process-wide client pointed at the test server."""
    sys.path.insert(0, str(JOBS_DIR))
    try:
        module = importlib.import_module("batch_jobs")
    finally:
        sys.path.remove(str(JOBS_DIR))
    rfetch.configure(redis_url=redis_server.url)
    yield module
    DEFAULT.set(None)


def evidence(directory: Path) -> list[list[str]]:
    """Every evidence line of every process, split at its tabs."""
    lines: list[list[str]] = []
    for path in sorted(directory.glob("*.log")):
        lines += [line.split("\t") for line in path.read_text().splitlines()]
    return lines


def callbacks(directory: Path, event: str, bid: str) -> list[list[str]]:
    return [w for w in evidence(directory) if w[:3] == ["callback", event, bid]]


@pytest.fixture
def worker(redis_server: RedisServer, r: redis.Redis, tmp_path: Path) -> Iterator[WorkerProcess]:
    (tmp_path / "ev").mkdir()
    proc = WorkerProcess(
        redis_server.url,
        ["-r", "batch_jobs", "-c", "5", "-t", "5"],
        env={**FAST_ENV, "RFETCH_BATCH_DIR": str(tmp_path / "ev")},
        log_dir=tmp_path,
    )
    proc.identity(r)
    yield proc
    proc.stop()


def test_success_and_complete_fire_once_with_the_status(
    bj: ModuleType, worker: WorkerProcess, r: redis.Redis, tmp_path: Path
) -> None:
    ev = tmp_path / "ev"
    batch = rfetch.Batch(
        description="import 2026-11",
        on_success=(bj.OnSuccess, {"import_id": 7}),
        on_complete=bj.OnComplete,
    )
    with batch.jobs():
        for n in range(20):
            bj.Item.perform_async(n, n % 10 == 0)
    assert len(batch.bid) == 24 and len(batch.jids) == 20
    wait_for(lambda: callbacks(ev, "success", batch.bid), 30, "the success callback")
    wait_for(lambda: callbacks(ev, "complete", batch.bid), 10, "the complete callback")
    [success] = callbacks(ev, "success", batch.bid)
    status, options = json.loads(success[3]), json.loads(success[4])
    assert options == {"import_id": 7}
    assert status["total"] == 20 and status["pending"] == 0 and status["failures"] == 0
    assert status["description"] == "import 2026-11" and status["failed_jids"] == []
    assert status["complete"] is True and status["parent_bid"] is None
    # complete fired when every job had run once: the two failures were still failing.
    [complete] = callbacks(ev, "complete", batch.bid)
    assert json.loads(complete[3])["failures"] in (0, 1, 2)
    last_ok = max(float(w[-1]) for w in evidence(ev) if w[0] == "ok")
    assert float(success[-1]) >= last_ok
    st = rfetch.BatchStatus(batch.bid)
    assert (st.total, st.pending, st.failures, st.complete, st.succeeded) == (20, 0, 0, True, True)
    assert 0 < st.expires_in <= 24 * 3600  # 24 h after success
    oks = {w[1] for w in evidence(ev) if w[0] == "ok"}
    assert oks == set(batch.jids)
    # A later look finds no second callback.
    assert len(callbacks(ev, "success", batch.bid)) == 1
    assert len(callbacks(ev, "complete", batch.bid)) == 1


def test_death_fires_once_and_success_never(
    bj: ModuleType, worker: WorkerProcess, r: redis.Redis, tmp_path: Path
) -> None:
    ev = tmp_path / "ev"
    batch = rfetch.Batch(on_success=bj.OnSuccess, on_complete=bj.OnComplete, on_death=bj.OnDeath)
    with batch.jobs():
        bj.Doomed.perform_async(1)
        bj.Doomed.perform_async(2)
        bj.Item.perform_async(3)
    wait_for(lambda: callbacks(ev, "complete", batch.bid), 30, "the complete callback")
    assert len(callbacks(ev, "death", batch.bid)) == 1
    assert callbacks(ev, "success", batch.bid) == []
    st = rfetch.BatchStatus(batch.bid)
    assert st.dead and not st.succeeded and st.complete
    assert (st.total, st.pending, st.failures) == (3, 2, 2)
    assert {f.error_class for f in st.failure_info} == {"RuntimeError"}
    assert r.zcard("dead") == 2
    assert st.expires_in > 24 * 3600  # not succeeded: the long TTL


def test_a_running_job_adds_jobs_to_its_own_batch(
    bj: ModuleType, worker: WorkerProcess, tmp_path: Path
) -> None:
    ev = tmp_path / "ev"
    batch = rfetch.Batch(on_success=bj.OnSuccess)
    with batch.jobs():
        bj.Spawner.perform_async(5)
    wait_for(lambda: callbacks(ev, "success", batch.bid), 30, "the success callback")
    status = json.loads(callbacks(ev, "success", batch.bid)[0][3])
    assert status["total"] == 6
    added = [w for w in evidence(ev) if w[0] == "ok"]
    assert len(added) == 6
    assert float(callbacks(ev, "success", batch.bid)[0][-1]) >= max(float(w[-1]) for w in added)


def test_a_parent_succeeds_after_its_child(
    bj: ModuleType, worker: WorkerProcess, tmp_path: Path
) -> None:
    ev = tmp_path / "ev"
    parent = rfetch.Batch(description="parent", on_success=bj.OnSuccess)
    with parent.jobs():
        bj.ParentStep.perform_async(3)
    wait_for(lambda: callbacks(ev, "success", parent.bid), 30, "the parent's success")
    [child_bid] = [w[1] for w in evidence(ev) if w[0] == "child"]
    [child_success] = callbacks(ev, "success", child_bid)
    [parent_success] = callbacks(ev, "success", parent.bid)
    child = rfetch.BatchStatus(child_bid)
    assert child.parent_bid == parent.bid
    st = rfetch.BatchStatus(parent.bid)
    # The parent's success fires with or after its child's (Redis time); their callbacks
    # are jobs of their own, which a worker may start in either order (workflows.md).
    assert child.success_at is not None and st.success_at is not None
    assert st.success_at >= child.success_at
    assert float(parent_success[-1]) >= child.success_at
    assert float(child_success[-1]) >= child.success_at
    assert (st.total, st.kids, st.kids_pending) == (1, 1, 0)


def test_a_raising_jobs_block_writes_nothing(
    bj: ModuleType, r: redis.Redis
) -> None:
    batch = rfetch.Batch(on_success=bj.OnSuccess)
    with pytest.raises(RuntimeError, match="boom"), batch.jobs():
        for n in range(10):
            bj.Item.perform_async(n)
        raise RuntimeError("boom")
    assert r.llen("queue:default") == 0
    assert r.exists(f"b-{batch.bid}") == 0
    with pytest.raises(rfetch.BatchNotFound):
        rfetch.BatchStatus(batch.bid)


def test_an_empty_batch_is_an_error(bj: ModuleType, r: redis.Redis) -> None:
    batch = rfetch.Batch(on_success=bj.OnSuccess)
    with pytest.raises(rfetch.BatchError, match="no job"), batch.jobs():
        pass
    assert r.dbsize() == 0


def test_adding_to_a_missing_or_succeeded_batch_is_refused(
    bj: ModuleType, r: redis.Redis
) -> None:
    with pytest.raises(rfetch.BatchNotFound), rfetch.Batch.reopen("0" * 24).jobs():
        bj.Item.perform_async(1)
    assert r.llen("queue:default") == 0
    batch = rfetch.Batch()
    with batch.jobs():
        bj.Item.perform_async(1)
    r.hset(f"b-{batch.bid}", "success_at", "1")
    with pytest.raises(rfetch.BatchError, match="has succeeded"), batch.jobs():
        bj.Item.perform_async(2)
    assert r.llen("queue:default") == 1


def test_batch_keys_expire(bj: ModuleType, r: redis.Redis) -> None:
    batch = rfetch.Batch(ttl=100, success_ttl=10)
    with batch.jobs():
        bj.Item.perform_async(1)
    for key in (f"b-{batch.bid}", f"b-{batch.bid}-jids", f"b-{batch.bid}-done",
                f"b-{batch.bid}-failinfo", f"b-{batch.bid}-died"):
        assert 90 < r.ttl(key) <= 100, key
    assert r.zscore("batches", batch.bid) is not None


def test_a_discarded_failure_is_a_death(
    bj: ModuleType, worker: WorkerProcess, r: redis.Redis, tmp_path: Path
) -> None:
    ev = tmp_path / "ev"
    batch = rfetch.Batch(on_death=bj.OnDeath, on_complete=bj.OnComplete)
    with batch.jobs():
        bj.Discarded.perform_async(1)
    wait_for(lambda: callbacks(ev, "complete", batch.bid), 30, "the complete callback")
    assert len(callbacks(ev, "death", batch.bid)) == 1
    assert r.zcard("dead") == 0  # dropped, not buried
    st = rfetch.BatchStatus(batch.bid)
    assert st.dead and st.failed_jids == batch.jids


def test_chord_pushes_its_callback_once_after_the_header(
    bj: ModuleType, worker: WorkerProcess, tmp_path: Path
) -> None:
    ev = tmp_path / "ev"
    res = rfetch.chord([bj.Item.s(1), bj.Item.s(2, True), bj.Item.s(3)], bj.ChordBody.s("sum"))
    assert len(res.jids) == 3
    wait_for(lambda: callbacks(ev, "chord", "sum"), 30, "the chord's callback")
    [body] = callbacks(ev, "chord", "sum")
    assert float(body[-1]) >= max(float(w[-1]) for w in evidence(ev) if w[0] == "ok")
    assert res.status().succeeded and res.status().total == 3


def test_group_is_a_batch_without_callbacks(
    bj: ModuleType, worker: WorkerProcess, r: redis.Redis
) -> None:
    res = rfetch.group(bj.Item.s(n) for n in range(5))
    assert len(res.jids) == 5 and r.hget(f"b-{res.bid}", "cb_success") is None
    wait_for(lambda: res.status().succeeded, 30, "the group's success")
    assert res.status().total == 5


def test_only_batched_payloads_carry_a_bid(bj: ModuleType, r: redis.Redis) -> None:
    bj.Item.perform_async(1)
    batch = rfetch.Batch()
    with batch.jobs():
        bj.Item.perform_async(2)
    plain, batched = (json.loads(raw) for raw in r.lrange("queue:default", 0, -1)[::-1])
    assert "bid" not in plain
    assert batched["bid"] == batch.bid


def test_explain_names_the_batch_of_a_waiting_job(
    bj: ModuleType, r: redis.Redis, redis_server: RedisServer
) -> None:
    from rfetch.api import Api
    from rfetch.config import Config

    batch = rfetch.Batch(description="nightly", on_success=bj.OnSuccess)
    with batch.jobs():
        bj.Item.perform_async(1)
        bj.Item.perform_async(2)
    lines = Api(Config(redis_url=redis_server.url), redis=r).explain(batch.jids[0]).lines()
    [line] = [text for text in lines if "in batch" in text]
    assert f"in batch {batch.bid} (nightly)" in line
    assert "not yet run to its end" in line and "0 of 2 jobs succeeded" in line
    assert "success callback(s) wait" in line


def test_a_child_given_parent_passes_its_death_up_and_holds_the_parent(
    bj: ModuleType, worker: WorkerProcess, tmp_path: Path
) -> None:
    ev = tmp_path / "ev"
    parent = rfetch.Batch(description="parent", on_success=bj.OnSuccess,
                          on_complete=bj.OnComplete, on_death=bj.OnDeath)
    with parent.jobs():
        bj.Item.perform_async(1, False, 1000)  # still running when the child joins
    child = rfetch.Batch(description="child", parent=parent.bid)
    with child.jobs():
        bj.Doomed.perform_async(2)
    wait_for(lambda: callbacks(ev, "complete", parent.bid), 30, "the parent's complete")
    assert len(callbacks(ev, "death", parent.bid)) == 1  # the child's death is the parent's
    assert callbacks(ev, "success", parent.bid) == []  # its child never succeeded
    st = rfetch.BatchStatus(parent.bid)
    assert (st.pending, st.kids, st.kids_pending) == (0, 1, 1) and st.dead
    assert rfetch.BatchStatus(child.bid).parent_bid == parent.bid


def test_async_pushes_join_the_batch(bj: ModuleType, r: redis.Redis) -> None:
    from tests.support.aio import run_async

    async def push() -> rfetch.Batch:
        batch = rfetch.Batch()
        with batch.jobs():
            await bj.Item.aperform_async(1)
            await bj.Item.aperform_async(2)
        return batch

    batch = run_async(push())
    assert len(batch.jids) == 2 and r.llen("queue:default") == 2
    assert r.hget(f"b-{batch.bid}", "total") == b"2"


def test_a_batch_expires_after_its_ttl_and_after_success(
    bj: ModuleType, worker: WorkerProcess, r: redis.Redis, tmp_path: Path
) -> None:
    import time

    from rfetch.api.batches import list_batches
    from rfetch.api.context import Context
    from rfetch.config import Config

    idle = rfetch.Batch(ttl=2)  # its job sits in a queue no worker takes
    with idle.jobs():
        bj.Item.set(queue="nobody").perform_async(1)
    done = rfetch.Batch(success_ttl=2, on_success=bj.OnSuccess)
    with done.jobs():
        bj.Item.perform_async(2)
    wait_for(lambda: callbacks(tmp_path / "ev", "success", done.bid), 30, "success")
    time.sleep(3)
    for bid in (idle.bid, done.bid):
        with pytest.raises(rfetch.BatchNotFound):
            rfetch.BatchStatus(bid)
        assert r.keys(f"b-{bid}*") == []
    ctx = Context.build(Config(), r)
    assert {b.bid for b in list_batches(ctx)} == set()  # listed bids whose hash expired


def test_keyed_scheduled_and_unique_jobs_in_a_batch(
    bj: ModuleType, worker: WorkerProcess, r: redis.Redis, tmp_path: Path
) -> None:
    ev = tmp_path / "ev"
    batch = rfetch.Batch(on_success=bj.OnSuccess)
    with batch.jobs():
        for n in range(3):  # one ordering key: run one at a time, the release rides on the ack
            bj.Item.set(key="k").perform_async(n, n == 1)
        bj.Item.perform_in(1, 10)  # scheduled: the poller moves it, the ack counts it
        bj.Item.set(unique_for=60).perform_async(20)
        bj.Item.set(unique_for=60).perform_async(20)  # the same lock: left out of the batch
    assert len(batch.jids) == 5
    wait_for(lambda: callbacks(ev, "success", batch.bid), 30, "the success callback")
    assert json.loads(callbacks(ev, "success", batch.bid)[0][3])["total"] == 5
    assert r.hlen("rfetch:key-holders:default") == 0  # every key released


def test_capped_jobs_in_a_batch(
    bj: ModuleType, redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    ev = tmp_path / "ev-capped"
    ev.mkdir()
    batch = rfetch.Batch(on_success=bj.OnSuccess)
    with batch.jobs():  # a fetch cap: their slot is given back with the same acknowledgement
        for n in range(4):
            bj.Item.set(concurrency_key="c", concurrency_limit=1).perform_async(n, n == 0)
    # Started after the push: a worker learns that a queue has capped jobs when it starts
    # (an idle one looks again every 30 s).
    proc = WorkerProcess(redis_server.url, ["-r", "batch_jobs", "-c", "3"],
                         env={**FAST_ENV, "RFETCH_BATCH_DIR": str(ev)}, log_dir=tmp_path)
    try:
        wait_for(lambda: callbacks(ev, "success", batch.bid), 30, "the success callback")
    finally:
        proc.stop()
    assert json.loads(callbacks(ev, "success", batch.bid)[0][3])["total"] == 4
    assert rfetch.BatchStatus(batch.bid).pending == 0
