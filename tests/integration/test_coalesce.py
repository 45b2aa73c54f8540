"""Coalescing of the waiting jobs of one ordering key, against a real
redis-server: one execution receives every waiting payload in score order
(``coalesce=True``) or only the newest (``coalesce="last"``)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import rfetch
from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError
from rfetch.jobs.job import RetryDecision
from tests.support.gate_worker import Worker, holder, make_due, queue_jids, running, waiting
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

BATCHES: list[Any] = []
"""What each execution of the jobs below received."""
FAIL_NEXT: list[bool] = []
GATE = threading.Event()


class Index(rfetch.Job):
    """Coalesces: receives the list of argument lists."""

    queue = "q"
    coalesce = True

    def ordering_key(self, shipment: str, *rest: Any) -> str | None:
        return f"shipment:{shipment}"

    def perform(self, batch: list[list[Any]]) -> None:
        BATCHES.append([args[1] for args in batch])
        if not GATE.is_set():
            GATE.wait(10)
        if FAIL_NEXT:
            FAIL_NEXT.pop()
            raise RuntimeError("index failed")

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> RetryDecision:
        return 1000.0


class Latest(rfetch.Job):
    """Keeps only the newest payload."""

    queue = "q"
    coalesce = "last"

    def ordering_key(self, shipment: str, *rest: Any) -> str | None:
        return f"shipment:{shipment}"

    def perform(self, shipment: str, version: int) -> None:
        BATCHES.append(version)


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    BATCHES.clear()
    FAIL_NEXT.clear()
    GATE.set()
    yield
    BATCHES.clear()
    FAIL_NEXT.clear()
    GATE.set()


@pytest.fixture
def cfg(redis_server: RedisServer, r: redis.Redis) -> Config:
    return Config(
        redis_url=redis_server.url, queues=[QueueSpec("q")], block_timeout=0.1, concurrency=2
    )


@pytest.fixture
def worker(cfg: Config) -> Iterator[Worker]:
    with running(cfg, [Index, Latest]) as w:
        yield w


def push(w: Worker, cls: type[rfetch.Job], *args: Any, **opts: Any) -> str:
    jid = cls.set(client=w.client, **opts).perform_async(*args)
    assert jid is not None
    return jid


def test_50_pushes_while_the_worker_is_busy_run_as_at_most_2_executions(
    cfg: Config, worker: Worker, r: redis.Redis
) -> None:
    GATE.clear()  # the first execution blocks until all 50 are pushed
    manager = worker.launcher.manager
    manager.start()
    try:
        push(worker, Index, "s1", 0)
        wait_for(lambda: len(BATCHES) == 1, 10, "the first execution to start")
        for version in range(1, 50):
            push(worker, Index, "s1", version)
        GATE.set()
        wait_for(lambda: holder(r, "shipment:s1") is None, 10, "the key to be free")
    finally:
        manager.finish()
    assert len(BATCHES) <= 2
    assert [v for batch in BATCHES for v in batch] == list(range(50))
    assert r.llen(worker.fetch.private_key("q")) == 0
    assert r.exists("rfetch:key:q:shipment:s1", "queue:q") == 0


def test_coalesced_batch_follows_score_order(worker: Worker, r: redis.Redis) -> None:
    push(worker, Index, "s1", "head", score=5)
    head = worker.take()
    for name, score in (("c", 30), ("a", 10), ("b", 20), ("early", 1)):
        push(worker, Index, "s1", name, score=score)
    worker.processor.process(head)
    assert BATCHES == [["early", "head", "a", "b", "c"]]


def test_last_keeps_only_the_newest_payload(worker: Worker, r: redis.Redis) -> None:
    push(worker, Latest, "s1", 0)
    head = worker.take()
    for version in range(1, 10):
        push(worker, Latest, "s1", version)
    worker.processor.process(head)
    assert BATCHES == [9]
    assert holder(r, "shipment:s1") is None
    assert r.llen(worker.fetch.private_key("q")) == 0


def test_failure_puts_the_followers_back_in_order_behind_the_blocked_holder(
    worker: Worker, r: redis.Redis
) -> None:
    first = push(worker, Index, "s1", 0)
    head = worker.take()
    followers = [push(worker, Index, "s1", v) for v in range(1, 4)]
    FAIL_NEXT.append(True)
    worker.processor.process(head)
    assert BATCHES == [[0, 1, 2, 3]]
    assert r.zcard("retry") == 1 and holder(r, "shipment:s1") == first
    assert waiting(r, "shipment:s1") == followers
    assert r.llen(worker.fetch.private_key("q")) == 0
    later = push(worker, Index, "s1", 4)
    make_due(r, "retry")
    worker.poller.enqueue_due()
    assert queue_jids(r) == [first]
    worker.work_one()
    assert BATCHES[-1] == [0, 1, 2, 3, 4]
    assert holder(r, "shipment:s1") is None and later


def test_a_crash_returns_the_followers_to_the_head_of_the_key(
    cfg: Config, worker: Worker, r: redis.Redis
) -> None:
    first = push(worker, Index, "s1", 0)
    head = worker.take()
    followers = [push(worker, Index, "s1", v) for v in range(1, 4)]
    assert len(worker.fetch.take_followers(head, 100)) == 3  # then the process dies
    worker.other_process().reap(worker.identity, ["q"])
    assert queue_jids(r) == [first] and waiting(r, "shipment:s1") == followers
    worker.work_one()
    assert BATCHES == [[0, 1, 2, 3]]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"coalesce": True}, "coalesce needs an ordering key"),
        ({"coalesce": "first", "key": "k"}, 'coalesce must be True, "last" or False'),
        ({"score": "high", "key": "k"}, "score must be a number"),
    ],
)
def test_bad_coalesce_options_raise(
    worker: Worker, r: redis.Redis, options: dict[str, Any], message: str
) -> None:
    class Plain(rfetch.Job):
        queue = "q"

    with pytest.raises(ConfigError, match=re.escape(message)):
        Plain.set(client=worker.client, **options).perform_async(1)
    assert r.dbsize() == 0


def test_coalesce_with_one_job_gets_a_batch_of_one(worker: Worker, r: redis.Redis) -> None:
    push(worker, Index, "s1", 0)
    worker.work_one()
    assert BATCHES == [[0]]
