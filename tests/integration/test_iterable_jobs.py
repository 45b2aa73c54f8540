"""Iterable jobs with real worker processes and signals: a walk to the end (Sidekiq 7.3's
``it-<jid>`` deleted), TSTP and TERM past ``-t`` interrupting at an item boundary (pushed
back uncounted, resumed from the cursor, no item run twice), ``max_runtime``, a failing
item retried from its cursor, a cancel honoured at the next item; and the fence of
``checkpoint.lua`` itself."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import redis

import rfetch
from rfetch.api import Api
from rfetch.store.checkpoint_commands import CheckpointCommands
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from tests.support.redis_server import RedisServer
from tests.support.swarm import set_entries
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, JOBS_DIR, WorkerProcess


@pytest.fixture(autouse=True)
def _jobs_on_path(monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer) -> None:
    monkeypatch.syspath_prepend(str(JOBS_DIR))
    monkeypatch.setenv("REDIS_URL", redis_server.url)


def _push(url: str, name: str, *args: object) -> str:
    import durable_jobs

    client = rfetch.Client(rfetch.Config(redis_url=url))
    jid = getattr(durable_jobs, name).set(client=client).perform_async(*args)
    assert jid is not None
    return jid


def _counts(r: redis.Redis, jid: str) -> dict[int, int]:
    return {int(k): int(v) for k, v in r.hgetall(f"walk:{jid}").items()}


def _api(redis_server: RedisServer) -> Api:
    return Api(rfetch.Config(redis_url=redis_server.url))


def _worker(url: str, tmp_path: Path, *extra: str) -> WorkerProcess:
    return WorkerProcess(url, ["-r", "durable_jobs", "-c", "2", *extra], env=FAST_ENV,
                         log_dir=tmp_path)


def test_a_walk_runs_every_item_once_and_deletes_its_state(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    worker = _worker(redis_server.url, tmp_path)
    try:
        jid = _push(redis_server.url, "Walk", 200, 0.0)
        wait_for(lambda: r.get(f"complete:{jid}") == b"1", 30, worker.log)
        assert _counts(r, jid) == {i: 1 for i in range(200)}
        assert not r.exists(f"it-{jid}")
    finally:
        worker.stop()


@pytest.mark.parametrize("sig", [signal.SIGTSTP, signal.SIGTERM])
def test_quiet_or_term_interrupts_at_an_item_and_resumes_from_the_cursor(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, sig: signal.Signals
) -> None:
    first = _worker(redis_server.url, tmp_path, "-t", "1")
    jid = _push(redis_server.url, "Walk", 400, 0.02)
    try:
        wait_for(lambda: len(_counts(r, jid)) >= 20, 30, first.log)
        first.signal(sig)
        # Pushed back uncounted to its queue, its cursor saved in Sidekiq 7.3's fields.
        wait_for(lambda: r.llen("queue:default") == 1, 30, first.log)
        state = {k.decode(): v.decode() for k, v in r.hgetall(f"it-{jid}").items()}
        assert state["ex"] == "1" and float(state["rt"]) > 0
        cursor = json.loads(state["c"])
        assert cursor == max(_counts(r, jid))
        assert "retry_count" not in json.loads(r.lindex("queue:default", 0) or b"{}")
        lines = {loc.state: loc.text for loc in _api(redis_server).explain(jid).locations}
        assert f"resumes after cursor {cursor}, 1 execution(s)" in lines["iteration"]
    finally:
        first.signal(signal.SIGTERM)
        first.wait(30)
    second = _worker(redis_server.url, tmp_path)
    try:
        wait_for(lambda: r.get(f"complete:{jid}") == b"1", 60, second.log)
    finally:
        second.stop()
    # Interrupted at an item boundary: not one item ran twice, none was skipped.
    assert _counts(r, jid) == {i: 1 for i in range(400)}
    assert r.lrange(f"cursors:{jid}", 0, -1) == [b"start", str(cursor).encode()]
    assert set_entries(r, "retry") == {}


def test_max_runtime_sends_the_job_back_to_its_queue(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    worker = _worker(redis_server.url, tmp_path)
    try:
        jid = _push(redis_server.url, "ShortWalk", 150, 0.02)
        wait_for(lambda: r.get(f"complete:{jid}") == b"1", 60, worker.log)
    finally:
        worker.stop()
    assert _counts(r, jid) == {i: 1 for i in range(150)}
    resumes = r.lrange(f"cursors:{jid}", 0, -1)
    assert len(resumes) >= 2
    progress = json.loads(r.get(f"rfetch:progress:{jid}") or b"{}")
    assert "/150 items" in progress["message"] and 0 < progress["percent"] <= 100
    assert [int(c) for c in resumes[1:]] == sorted(int(c) for c in resumes[1:])
    assert set_entries(r, "retry") == {}


def test_a_failing_item_is_retried_from_its_cursor_not_from_the_start(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    worker = _worker(redis_server.url, tmp_path)
    try:
        jid = _push(redis_server.url, "FailOnce", 40, 0.0)
        wait_for(lambda: r.get(f"complete:{jid}") == b"1", 60, worker.log)
    finally:
        worker.stop()
    counts = _counts(r, jid)
    assert counts[20] == 2  # the failing item, run again by the retry
    assert all(counts[i] == 1 for i in range(40) if i != 20)
    assert r.lrange(f"cursors:{jid}", 0, -1) == [b"start", b"19"]


def test_a_cancel_is_honoured_at_the_next_item(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    worker = _worker(redis_server.url, tmp_path)
    try:
        jid = _push(redis_server.url, "Walk", 10_000, 0.01)
        wait_for(lambda: len(_counts(r, jid)) >= 10, 30, worker.log)
        _api(redis_server).cancel(jid)
        wait_for(lambda: r.hexists(f"it-{jid}", "cancelled"), 30, worker.log)
        wait_for(lambda: "cancelled" in worker.log(), 30, worker.log)
    finally:
        worker.stop()
    done = _counts(r, jid)
    assert len(done) < 10_000 and set(done.values()) == {1}
    assert json.loads(r.hget(f"it-{jid}", "c") or b"null") == max(done)
    assert r.get(f"complete:{jid}") is None
    assert r.llen("queue:default") == 0 and set_entries(r, "retry") == {}


def test_a_checkpoint_is_written_only_by_the_owner(r: redis.Redis) -> None:
    checkpoints = CheckpointCommands(Commands(r, Keys()))
    r.rpush("queue:sq|w1|default", b"payload-a")
    owned = checkpoints.write("queue:sq|w1|default", b"payload-a", "it-a", {"c": "5"})
    assert owned.owned and r.hget("it-a", "c") == b"5"
    assert 0 < r.ttl("it-a") <= 30 * 24 * 3600
    refused = checkpoints.write("queue:sq|w2|default", b"payload-a", "it-a", {"c": "1"})
    assert not refused.owned and r.hget("it-a", "c") == b"5"
    assert not checkpoints.delete("queue:sq|w2|default", b"payload-a", "it-a")
    r.hset("it-a", "cancelled", "1700000000")
    assert checkpoints.write("queue:sq|w1|default", b"payload-a", "it-a", {}).cancelled == (
        "1700000000")
    assert checkpoints.delete("queue:sq|w1|default", b"payload-a", "it-a")
    assert not r.exists("it-a")
