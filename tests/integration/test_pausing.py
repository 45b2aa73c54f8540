"""Queue pausing, worker side: a paused queue gives no job within a second; unpause resumes."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.store.keys import Keys
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

KEYS = Keys()


def done(record: Path) -> list[str]:
    if not record.exists():
        return []
    return [ln.split()[1] for ln in record.read_text().splitlines() if ln.startswith("done")]


def pause(r: redis.Redis, queue: str) -> None:
    r.sadd(KEYS.paused, queue)
    r.publish(KEYS.pause_channel, f"pause {queue}")


def unpause(r: redis.Redis, queue: str) -> None:
    r.srem(KEYS.paused, queue)
    r.publish(KEYS.pause_channel, f"unpause {queue}")


def test_paused_queue_is_left_alone_until_unpaused(
    r: redis.Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    env = {"RFETCH_TEST_RECORD": str(record), "RFETCH_BLOCK_TIMEOUT": "0.5"}
    worker = WorkerProcess(
        redis_server.url, ["-r", "testjobs", "-q", "low", "-q", "high", "-c", "2"], env, tmp_path
    )
    try:
        worker.identity(r)
        client = Client(Config(redis_url=redis_server.url), r)
        pause(r, "low")
        first = client.push("testjobs.Noop", [1], {"queue": "high"})
        wait_for(lambda: done(record) == [first], 10, "a job of the unpaused queue")
        held = [client.push("testjobs.Noop", [i], {"queue": "low"}) for i in range(3)]
        second = client.push("testjobs.Noop", [2], {"queue": "high"})
        wait_for(lambda: second in done(record), 10, "another job of the unpaused queue")
        # A negative (the paused queue is not fetched) needs a span: three blocking-fetch
        # timeouts, in which the worker had every chance to take a job of "low".
        time.sleep(1.5)
        assert r.llen("queue:low") == 3
        assert not set(held) & set(done(record))
        unpause(r, "low")
        wait_for(lambda: set(held) <= set(done(record)), 10, "the unpaused queue's jobs")
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(15) == 0


def test_a_queue_paused_before_start_is_never_fetched(
    r: redis.Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    client = Client(Config(redis_url=redis_server.url), r)
    jids = client.push_bulk("testjobs.Noop", [[i] for i in range(5)])
    r.sadd(KEYS.paused, "default")
    env = {"RFETCH_TEST_RECORD": str(record), "RFETCH_BLOCK_TIMEOUT": "0.5"}
    worker = WorkerProcess(redis_server.url, ["-r", "testjobs"], env, tmp_path)
    try:
        worker.identity(r)
        time.sleep(1.5)  # a negative, as above: three fetch timeouts with nothing taken
        assert r.llen("queue:default") == 5 and not done(record)
        unpause(r, "default")
        wait_for(lambda: set(jids) <= set(done(record)), 10, "the jobs after unpause")
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(15) == 0
