"""Async jobs on a real ``rfetch worker``: they run on the event loop beside the threads,
share reliable fetch, acknowledgement, retries and shutdown, and a TERM while they sleep
pushes them back with nothing lost.

Jobs come from ``tests/jobs/async_jobs.py`` (and ``testjobs.py`` for the sync ones); they
append ``<event> <jid> <pid> <time>`` lines to the ``RFETCH_TEST_RECORD`` file.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults

WORKER_ENV = {"RFETCH_HEARTBEAT_INTERVAL": "0.5", "RFETCH_BLOCK_TIMEOUT": "1"}


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    return WorkerDefaults(args=("-r", "testjobs", "-r", "async_jobs"), env=WORKER_ENV)


@pytest.fixture
def client(redis_server: RedisServer, r: redis.Redis) -> Client:
    return Client(Config(redis_url=redis_server.url), r)


def push(client: Client, name: str, *args: object) -> str:
    jid = client.push(name, list(args))
    assert jid is not None
    return jid


def private_lists(r: redis.Redis) -> list[bytes]:
    return list(r.scan_iter(match="queue:sq|*"))


def test_async_and_sync_jobs_share_one_process(
    start_worker: StartWorker, redis_server: RedisServer, record: Record, tmp_path: Path,
    client: Client, r: redis.Redis,
) -> None:
    async_jids = [push(client, "async_jobs.Waits", 0.01) for _ in range(30)]
    sync_jids = [push(client, "testjobs.Sleep", 0.01) for _ in range(10)]
    push(client, "async_jobs.waits_fn", 0.01)
    proc = start_worker("-c", "3")
    wait_for(lambda: len(record.jids("done")) == 41, 30, lambda: f"41 jobs done:\n{proc.log()}")
    assert sorted(record.jids("done")) == sorted([*async_jids, *sync_jids, "fn"])
    wait_for(lambda: r.llen("queue:default") == 0 and not any(
        r.llen(key) for key in private_lists(r)), 10, "acknowledged")
    assert r.zcard("retry") == 0
    proc.signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert "async_concurrency=100" in proc.log()


def test_async_failures_are_retried_as_sync_ones(
    start_worker: StartWorker, redis_server: RedisServer, record: Record, tmp_path: Path,
    client: Client, r: redis.Redis,
) -> None:
    failing = push(client, "async_jobs.Fails")
    cancelling = push(client, "async_jobs.CancelsItself")
    start_worker()
    wait_for(lambda: r.zcard("retry") == 2, 20, "two jobs in the retry set")
    retries = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("retry", 0, -1)}
    assert retries[failing]["error_class"] == "RuntimeError"
    assert retries[failing]["error_message"] == "async failure"
    assert retries[cancelling]["error_class"].endswith("CancelledError")
    assert all(job["retry_count"] == 0 for job in retries.values())


def test_async_concurrency_bounds_the_jobs_running_at_once(
    start_worker: StartWorker, redis_server: RedisServer, record: Record, tmp_path: Path,
    client: Client,
) -> None:
    jids = [push(client, "async_jobs.Waits", 0.3) for _ in range(9)]
    start_worker("--async-concurrency", "3")
    wait_for(lambda: len(record.jids("done")) == 9, 30, "9 jobs done")
    assert sorted(record.jids("done")) == sorted(jids)
    spans = record.spans()
    overlap = max(sum(1 for s, e in spans if s <= start_ < e) for start_, _ in spans)
    assert overlap == 3


def test_term_pushes_back_sleeping_async_jobs_and_loses_nothing(
    start_worker: StartWorker, redis_server: RedisServer, record: Record, tmp_path: Path,
    client: Client, r: redis.Redis,
) -> None:
    sleeping = [push(client, "async_jobs.Waits", 60) for _ in range(20)]
    threads = [push(client, "testjobs.Sleep", 60) for _ in range(2)]
    proc = start_worker("-c", "2", "-t", "1")
    wait_for(lambda: len(record.jids("start")) == 22, 20,
             lambda: f"22 jobs started:\n{proc.log()}")
    proc.signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    log = proc.log()
    assert "cancelled 20 async job(s) still running" in log
    back = [json.loads(raw)["jid"] for raw in r.lrange("queue:default", 0, -1)]
    assert sorted(back) == sorted([*sleeping, *threads])  # every job, once
    assert record.jids("done") == []
    assert not private_lists(r) or not any(r.llen(key) for key in private_lists(r))
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0
    # Pushed back as fetched: a new worker runs them.
    for raw in r.lrange("queue:default", 0, -1):
        assert "error_class" not in json.loads(raw)


def test_quiet_pushes_back_async_jobs_waiting_for_a_slot(
    start_worker: StartWorker, redis_server: RedisServer, record: Record, tmp_path: Path,
    client: Client, r: redis.Redis,
) -> None:
    jids = [push(client, "async_jobs.Waits", 60) for _ in range(6)]
    proc = start_worker("--async-concurrency", "2", "--prefetch", "10", "-t", "1")
    wait_for(lambda: len(record.jids("start")) == 2, 20, "two jobs started")
    running = set(record.jids("start"))
    proc.signal(signal.SIGTSTP)
    wait_for(lambda: r.llen("queue:default") == 4, 10,
             lambda: f"the 4 waiting jobs pushed back:\n{proc.log()}")
    back = {json.loads(raw)["jid"] for raw in r.lrange("queue:default", 0, -1)}
    assert back == set(jids) - running
    assert len(record.jids("start")) == 2  # quiet: nothing more starts
    proc.signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert {json.loads(raw)["jid"] for raw in r.lrange("queue:default", 0, -1)} == set(jids)


def test_an_async_job_sees_its_time_limit(
    start_worker: StartWorker, redis_server: RedisServer, record: Record, tmp_path: Path,
    client: Client, r: redis.Redis,
) -> None:
    jid = client.push("async_jobs.Limited", [], {"timeout": 0.3})  # as Limited.perform_async
    start_worker()
    wait_for(lambda: r.zcard("retry") == 1, 20, "the job in the retry set")
    [failed] = [json.loads(raw) for raw in r.zrange("retry", 0, -1)]
    assert failed["jid"] == jid
    assert failed["error_class"].endswith("JobTimeout")
    assert record.jids("done") == []


def test_async_jobs_finished_just_before_term_are_acknowledged_not_pushed_back(
    start_worker: StartWorker, redis_server: RedisServer, record: Record, tmp_path: Path,
    client: Client, r: redis.Redis,
) -> None:
    """The queue runs dry, so the fetcher blocks and the loop's acknowledgements go out from
    its executor; a TERM sent as the last job records its end finds them sent (the stop
    waits for them), so no finished job goes back to its queue to run again."""
    jids = [push(client, "async_jobs.Waits", 0.01) for _ in range(300)]
    proc = start_worker("-c", "2", "--async-concurrency", "200")
    wait_for(lambda: len(record.jids("done")) == 300, 60,
             lambda: f"300 jobs done:\n{proc.log()}")
    proc.signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    assert sorted(record.jids("done")) == sorted(jids)
    assert r.llen("queue:default") == 0, proc.log()
    assert not any(r.llen(key) for key in private_lists(r))
    assert "stopped (0 job(s) pushed back)" in proc.log()
