"""Priorities inside a queue (``lua/lib/priority.lua``): a job with a priority other than 0
waits in the queue's priority set ``rfetch:prio:<q>``; fetch takes priority > 0 before the
list, the list, then priority < 0; push order holds within a priority. Against a real
redis-server, with the in-process worker harness (``tests/support/gate_worker.py``)."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import pytest
import redis

import rfetch
from rfetch.errors import ConfigError, QueueFull
from rfetch.jobs.payload import new_jid
from rfetch.push.client import Client
from tests.support.gate_worker import FAIL, RAN, ByPost, Step, Worker

pytestmark = pytest.mark.usefixtures("clear_runs")


def push(w: Worker, arg: Any, priority: int | None = None, **opts: Any) -> str:
    options = {} if priority is None else {"priority": priority}
    jid = Step.set(client=w.client, **options, **opts).perform_async(arg)
    assert jid is not None
    return jid


def fetch_order(w: Worker, batch: int = 1) -> list[Any]:
    """First argument of every job, in the order fetched, ``batch`` per fetch call."""
    w.fetch.refresh_fair(force=True)
    order: list[Any] = []
    while units := w.fetch.retrieve_work(batch):
        order += [json.loads(u.raw)["args"][0] for u in units]
    return order


def test_higher_priority_first_fifo_within_and_the_list_at_priority_zero(
    worker: Worker, r: redis.Redis
) -> None:
    push(worker, "n1", -5)
    push(worker, "p0", None)
    push(worker, "a1", 3)
    push(worker, "b1", 9)
    push(worker, "a2", 3)
    push(worker, "z0", 0)  # priority 0 is a plain job of the list: no field, no set
    push(worker, "n2", -5)
    push(worker, "m1", -1)
    push(worker, "b2", 9)
    assert r.llen("queue:q") == 2
    assert r.zcard("rfetch:prio:q") == 7
    assert r.hexists("rfetch:prio-queues", "q")
    assert b'"priority"' not in r.lindex("queue:q", 0)  # type: ignore[operator]
    assert fetch_order(worker, batch=4) == [
        "b1", "b2", "a1", "a2", "p0", "z0", "m1", "n1", "n2"
    ]
    assert r.exists("rfetch:prio:q") == 0


def test_a_worker_that_does_not_know_the_queue_yet_still_drains_the_list(
    worker: Worker, r: redis.Redis
) -> None:
    worker.fetch.refresh_fair(force=True)  # looked up before the queue's first priority job
    push(worker, "p0")
    push(worker, "hi", 5)
    # The queue is not yet known as a priority queue (5 s between looks): the list is served...
    assert [json.loads(u.raw)["args"][0] for u in worker.fetch.retrieve_work(5)] == ["p0"]
    # ... and the priority job, once the worker looked the queue up.
    assert fetch_order(worker) == ["hi"]


def test_push_back_keeps_the_priority_and_runs_first_of_it(
    worker: Worker, r: redis.Redis
) -> None:
    for arg in ("a1", "a2", "a3"):
        push(worker, arg, 4)
    worker.fetch.refresh_fair(force=True)
    units = worker.fetch.retrieve_work(2)
    assert [json.loads(u.raw)["args"][0] for u in units] == ["a1", "a2"]
    assert worker.fetch.requeue(units) == 2
    assert r.llen("queue:q") == 0  # back to the priority set, not to the list
    assert worker.private_lengths() == 0
    assert fetch_order(worker) == ["a1", "a2", "a3"]


def test_orphan_recovery_returns_a_job_to_its_priority(worker: Worker, r: redis.Redis) -> None:
    push(worker, "lo", -3)
    push(worker, "plain")
    worker.fetch.refresh_fair(force=True)
    [unit] = worker.fetch.retrieve_work(1)
    assert json.loads(unit.raw)["args"][0] == "plain"
    [unit] = worker.fetch.retrieve_work(1)
    assert json.loads(unit.raw)["args"][0] == "lo"
    push(worker, "lo2", -3)
    worker.other_process().reap(worker.identity, ["q"])  # as for a dead process
    assert worker.private_lengths() == 0
    assert r.zcard("rfetch:prio:q") == 2  # "lo" back in the set, ahead of "lo2"
    assert r.llen("queue:q") == 1  # the plain job back at the head of the list
    assert fetch_order(worker) == ["plain", "lo", "lo2"]


def test_ordering_key_order_beats_priority(worker: Worker, r: redis.Redis) -> None:
    first = ByPost.set(client=worker.client, priority=1).perform_async(7, "first")
    second = ByPost.set(client=worker.client, priority=50).perform_async(7, "second")
    other = ByPost.set(client=worker.client, priority=20).perform_async(8, "other")
    assert first and second and other
    assert r.llen("rfetch:key:q:post:7") == 1  # the second waits behind its key's holder
    worker.fetch.refresh_fair(force=True)
    units = worker.fetch.retrieve_work(5)
    assert [json.loads(u.raw)["args"] for u in units] == [[8, "other"], [7, "first"]]
    for unit in units:
        worker.processor.process(unit)
    worker.fetch.retrieve_work(0)  # the acknowledgements release the key
    # the key's next job went out to the priority set with its own priority
    assert r.zcard("rfetch:prio:q") == 1
    assert [json.loads(u.raw)["args"] for u in worker.fetch.retrieve_work(5)] == [
        [7, "second"]
    ]


def test_in_a_fair_queue_priority_orders_the_jobs_without_a_tenant(
    worker: Worker, r: redis.Redis
) -> None:
    for i in range(3):
        push(worker, f"A{i}", None, tenant="A")
    push(worker, "p0")
    push(worker, "lo", -1)
    push(worker, "hi", 4)
    # The ring and the queue's own ready jobs alternate, as in any fair queue; among the
    # latter, priority order: hi (> 0), the list, then lo (< 0).
    assert fetch_order(worker, batch=10) == ["A0", "hi", "A1", "p0", "A2", "lo"]


def test_scheduled_and_retried_jobs_keep_their_priority(worker: Worker, r: redis.Redis) -> None:
    push(worker, "plain")
    Step.set(client=worker.client, priority=7).perform_in(0.01, "later")
    time.sleep(0.05)
    assert worker.commands.enqueue_due(worker.keys.schedule, 100).moved == 1  # type: ignore[attr-defined]
    assert r.zcard("rfetch:prio:q") == 1
    assert fetch_order(worker) == ["later", "plain"]
    # a failed priority job's retry comes back into the priority set when due
    FAIL.add("flaky")
    push(worker, "flaky", -6)
    push(worker, "plain2")
    worker.work_one()  # plain2 first (the list before priority < 0)
    worker.work_one()  # flaky fails: the retry set
    [(entry, _)] = r.zrange("retry", 0, -1, withscores=True)
    assert json.loads(entry)["priority"] == -6
    r.zadd("retry", {entry: 1.0})  # due now
    assert worker.commands.enqueue_due(worker.keys.retry, 100).moved == 1  # type: ignore[attr-defined]
    assert r.llen("queue:q") == 0 and r.zcard("rfetch:prio:q") == 1
    assert RAN[-2:] == [("Step", ["plain2"]), ("Step", ["flaky"])]


def test_bulk_push_and_batches_keep_priorities(worker: Worker, r: redis.Redis) -> None:
    client: Client = worker.client
    client.push_bulk(Step.job_name(), [["b1"], ["b2"]], {"queue": "q", "priority": -2})
    client.push_bulk(Step.job_name(), [["c1"], ["c2"]], {"queue": "q"})
    client.push_bulk(Step.job_name(), [["h1"]], {"queue": "q", "priority": 2})
    batch = rfetch.Batch(client=client)
    with batch.jobs():  # batch_push.lua: the batch's jobs and their registration, one call
        Step.set(client=client, priority=9).perform_async("in-batch-hi")
        Step.set(client=client).perform_async("in-batch")
    assert len(batch.jids) == 2
    assert fetch_order(worker, batch=10) == [
        "in-batch-hi", "h1", "c1", "c2", "in-batch", "b1", "b2"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("5", "whole number"),
        (2.5, "whole number"),
        (True, "whole number"),
        (101, "from -100 to 100"),
        (-101, "from -100 to 100"),
    ],
)
def test_bad_priorities_are_refused_at_push_time(
    worker: Worker, r: redis.Redis, value: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        Step.set(client=worker.client, priority=value).perform_async("x")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=message):
        worker.client.push(Step.job_name(), ["x"], {"priority": value})
    assert r.dbsize() == 0


@pytest.mark.parametrize(
    ("options", "other"),
    [
        ({"tenant": "acme"}, "tenant"),
        ({"concurrency_key": "c", "concurrency_limit": 2}, "concurrency_key"),
        ({"after": new_jid()}, "after"),
    ],
)
def test_unsupported_combinations_are_refused_at_push_time(
    worker: Worker, r: redis.Redis, options: dict[str, Any], other: str
) -> None:
    with pytest.raises(ConfigError, match=f"priority cannot be combined with {other}="):
        Step.set(client=worker.client, priority=3, **options).perform_async("x")
    assert r.exists("queue:q", "rfetch:prio:q") == 0


def test_max_queue_size_counts_the_priority_set(worker: Worker, r: redis.Redis) -> None:
    push(worker, "p0")
    push(worker, "hi", 5)
    capped = Client(dataclasses.replace(worker.config, max_queue_size={"q": 2}), worker.redis)
    with pytest.raises(QueueFull):
        Step.set(client=capped).perform_async("over")
    assert RAN == []
