"""Backpressure (``Config.max_queue_size``) and expiring jobs (``expires_in``) against a real
redis-server: a push past a queue's max raises :class:`rfetch.QueueFull` and writes nothing
(single, bulk, asyncio, and with a ``batch_size`` the batches before are named); scheduled
jobs are never refused when due; an expired job is dropped before it runs, counted and
logged with its jid, and gives back what it held."""

from __future__ import annotations

import dataclasses
import json
import logging
import time

import pytest
import redis

from rfetch.config import Config
from rfetch.errors import BulkPushError, ConfigError, QueueFull
from rfetch.push.client import Client
from tests.support.aio import run_async
from tests.support.gate_worker import RAN, Step, Worker

pytestmark = pytest.mark.usefixtures("clear_runs")


@pytest.fixture
def full(cfg: Config, r: redis.Redis) -> Client:
    """A client whose queue ``q`` takes at most 3 jobs."""
    return Client(dataclasses.replace(cfg, max_queue_size={"q": 3}), r)


def test_a_push_past_the_max_raises_queue_full_and_writes_nothing(
    full: Client, r: redis.Redis
) -> None:
    for i in range(3):
        assert Step.set(client=full).perform_async(i)
    before = r.lrange("queue:q", 0, -1)
    with pytest.raises(QueueFull, match="queue q holds 3 jobs; 1 more would pass its "
                       "max_queue_size of 3"):
        Step.set(client=full).perform_async(3)
    assert r.lrange("queue:q", 0, -1) == before
    assert Step.set(client=full, queue="other").perform_async(9)  # other queues: no limit


def test_a_bulk_push_past_the_max_writes_none_of_its_jobs(full: Client, r: redis.Redis) -> None:
    assert Step.set(client=full).perform_async(0)
    with pytest.raises(QueueFull):
        Step.set(client=full).perform_bulk([[i] for i in range(3)])
    assert r.llen("queue:q") == 1
    with pytest.raises(BulkPushError) as caught:  # batches: the first is written, named
        Step.set(client=full).perform_bulk([[i] for i in range(4)], batch_size=2)
    assert len(caught.value.jids) == 2 and r.llen("queue:q") == 3
    assert isinstance(caught.value.__cause__, QueueFull)


def test_asyncio_pushes_are_refused_the_same_way(full: Client, r: redis.Redis) -> None:
    async def go() -> None:
        for i in range(3):
            assert await Step.set(client=full).aperform_async(i)
        with pytest.raises(QueueFull):
            await Step.set(client=full).aperform_async(3)

    run_async(go())
    assert r.llen("queue:q") == 3


def test_scheduled_jobs_are_not_refused_when_they_become_due(
    full: Client, r: redis.Redis, worker: Worker
) -> None:
    for i in range(3):
        Step.set(client=full).perform_async(i)
    Step.set(client=full).perform_in(100, "later")  # not in the queue: not counted
    r.zadd("schedule", {m: 1.0 for m in r.zrange("schedule", 0, -1)}, xx=True)
    assert worker.poller.enqueue_due() == 1
    assert r.llen("queue:q") == 4  # accepted at push time, so never dropped when due


def test_max_queue_size_must_be_a_positive_whole_number(cfg: Config) -> None:
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match="max_queue_size of queue 'q'"):
            dataclasses.replace(cfg, max_queue_size={"q": bad})


def test_an_expired_job_is_dropped_before_it_runs_counted_and_logged(
    worker: Worker, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    jid = Step.set(client=worker.client, expires_in=0.05).perform_async("late")
    fresh = Step.set(client=worker.client, expires_in=600).perform_async("fresh")
    time.sleep(0.1)
    with caplog.at_level(logging.WARNING, logger="rfetch.expiry"):
        assert worker.drain() == 2
    assert RAN == [("Step", ["fresh"])]  # the expired one never ran
    assert r.get("stat:expired") == b"1"
    assert f"jid={jid}" in caplog.text and f"jid={fresh}" not in caplog.text
    assert worker.private_lengths() == 0  # dropped means acknowledged, not left behind


def test_an_expired_capped_job_gives_its_slot_back(worker: Worker, r: redis.Redis) -> None:
    opts = {"concurrency_key": "k", "concurrency_limit": 1}
    Step.set(client=worker.client, expires_in=0.05, **opts).perform_async("late")
    Step.set(client=worker.client, **opts).perform_async("next")
    time.sleep(0.1)
    assert worker.drain() == 2
    assert RAN == [("Step", ["next"])]
    assert r.exists("rfetch:cap-held:q", "rfetch:cap-slots:q") == 0


def test_expires_in_counts_from_the_run_time_of_a_scheduled_job(worker: Worker) -> None:
    at = time.time() + 3600
    Step.set(client=worker.client, expires_in=10).perform_at(at, "s")
    raw = worker.redis.zrange("schedule", 0, -1)[0]
    assert json.loads(raw)["expires_at"] == pytest.approx(at + 10)
