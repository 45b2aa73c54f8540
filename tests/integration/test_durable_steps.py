"""Durable steps with a real worker: a job failing after its third step is retried and
steps 1-3 do not run again (their recorded results are returned); steps inside an
iterable job's item belong to that item and are dropped once it is done."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

import rfetch
from tests.support.redis_server import RedisServer
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


def test_a_retried_job_does_not_repeat_its_recorded_steps(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    worker = WorkerProcess(redis_server.url, ["-r", "durable_jobs"], env=FAST_ENV,
                           log_dir=tmp_path)
    try:
        jid = _push(redis_server.url, "StepsFailOnce", 0.0)
        wait_for(lambda: r.get(f"sum:{jid}") is not None, 60, worker.log)
    finally:
        worker.stop()
    assert [r.get(f"step:{jid}:{i}") for i in range(1, 6)] == [b"1"] * 5
    assert r.get(f"sum:{jid}") == b"150"  # recorded results returned on the retry
    assert r.hkeys(f"rfetch:steps:{jid}") != []
    assert 0 < r.ttl(f"rfetch:steps:{jid}") <= 30 * 24 * 3600


def test_steps_inside_an_item_belong_to_the_item(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    worker = WorkerProcess(redis_server.url, ["-r", "durable_jobs"], env=FAST_ENV,
                           log_dir=tmp_path)
    try:
        jid = _push(redis_server.url, "ItemSteps")
        wait_for(lambda: r.get(f"complete:{jid}") == b"1", 60, worker.log)
    finally:
        worker.stop()
    # Item 3 failed between its steps: its step "a" is not repeated by the retry.
    assert r.hgetall(f"a:{jid}") == {str(i).encode(): b"1" for i in range(6)}
    assert r.hgetall(f"b:{jid}") == {str(i).encode(): b"1" for i in range(6)}
    assert not r.exists(f"rfetch:steps:{jid}") and not r.exists(f"it-{jid}")
