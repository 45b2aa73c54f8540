"""Fetch caps (concurrency keys), step by step against a real redis-server: at most N jobs
of a key are fetched and unfinished at once, the others wait unfetched; every way out of a
private list gives the slot back (ack, settle, push-back, orphan recovery), and the
invariant "a key is in the ready ring iff it has waiting jobs and a free slot" holds."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from rfetch.api import Api
from rfetch.errors import ConfigError
from rfetch.worker.unit import UnitOfWork
from tests.support.gate_worker import FAIL, RAN, Step, Worker, make_due

pytestmark = pytest.mark.usefixtures("clear_runs")


def push(w: Worker, key: str | None, *args: Any, limit: int = 2, **opts: Any) -> str:
    options: dict[str, Any] = dict(opts)
    if key is not None:
        options.update(concurrency_key=key, concurrency_limit=limit)
    jid = Step.set(client=w.client, **options).perform_async(*args)
    assert jid is not None
    return jid


def firsts(units: list[UnitOfWork]) -> list[Any]:
    return [json.loads(u.raw)["args"][0] for u in units]


def take_all(w: Worker, batch: int = 10) -> list[UnitOfWork]:
    return w.fetch.retrieve_work(batch)


def assert_clean(r: redis.Redis) -> None:
    """Nothing held, nothing waiting, an empty ring, no stale limit."""
    keys = ("rfetch:cap:q", "rfetch:cap-held:q", "rfetch:cap-slots:q", "rfetch:cap-limits:q")
    assert r.exists(*keys) == 0
    assert list(r.scan_iter(match="rfetch:cap:q|*")) == []


def test_at_most_limit_are_fetched_and_an_ack_lets_the_next_one_out(
    worker: Worker, r: redis.Redis
) -> None:
    for i in range(5):
        push(worker, "t42", f"a{i}")
    push(worker, None, "plain")
    assert r.llen("queue:q") == 1  # capped jobs wait in their key's list, not in the queue
    first = take_all(worker)
    assert sorted(firsts(first)) == ["a0", "a1", "plain"]
    assert take_all(worker) == []  # the key is full: its waiting jobs are not fetched
    assert r.hget("rfetch:cap-held:q", "t42") == b"2"
    worker.processor.process(first[0])
    second = take_all(worker)
    assert firsts(second) == ["a2"]  # one finished, exactly one more goes out
    assert take_all(worker) == []
    for unit in first[1:] + second:
        worker.processor.process(unit)
    assert worker.drain() == 2  # a3, a4
    worker.fetch.acknowledge(first[0])  # harmless repeat
    assert r.hget("rfetch:cap-held:q", "t42") is None
    assert len(RAN) == 6


def test_keys_are_served_round_robin_each_up_to_its_limit(worker: Worker, r: redis.Redis) -> None:
    for i in range(3):
        push(worker, "A", f"A{i}", limit=1)
    for i in range(3):
        push(worker, "B", f"B{i}", limit=2)
    assert firsts(take_all(worker)) == ["A0", "B0", "B1"]
    assert take_all(worker) == []


def test_a_failure_gives_the_slot_back_and_the_retry_meets_the_cap_again(
    worker: Worker, r: redis.Redis
) -> None:
    FAIL.add("f0")
    push(worker, "k", "f0", limit=1)
    push(worker, "k", "f1", limit=1)
    worker.work_one()  # f0 fails: retry set, slot given back
    assert r.zcard("retry") == 1
    unit = worker.take()
    assert firsts([unit]) == ["f1"]
    FAIL.clear()
    make_due(r, "retry")
    worker.poller.enqueue_due()
    assert r.llen("rfetch:cap:q|k") == 1  # the retry waits: f1 holds the only slot
    assert take_all(worker) == []
    worker.processor.process(unit)
    assert worker.drain() == 1
    assert_clean(r)


def test_push_back_gives_the_slot_back_and_the_job_goes_first(
    worker: Worker, r: redis.Redis
) -> None:
    for i in range(3):
        push(worker, "k", f"p{i}", limit=1)
    unit = worker.take()
    assert unit.requeue()
    assert r.hget("rfetch:cap-held:q", "k") is None
    assert firsts(take_all(worker)) == ["p0"]  # back at the head of its key's list
    assert worker.drain() == 0  # still full
    assert worker.fetch.requeue_unheld([], "test") == 1
    assert worker.drain() == 3
    assert_clean(r)


def test_a_dead_holders_slot_comes_back_with_orphan_recovery_not_before(
    worker: Worker, r: redis.Redis
) -> None:
    for i in range(4):
        push(worker, "k", f"o{i}", limit=2)
    dead = take_all(worker)
    assert firsts(dead) == ["o0", "o1"]
    other = Worker(worker.config)  # a live process; the first one "died" holding two slots
    assert take_all(other) == []
    assert other.other_process().reap(worker.identity, ["q"]) == 2
    assert r.hget("rfetch:cap-held:q", "k") is None
    assert firsts(take_all(other)) == ["o0", "o1"]  # recovered first, in their order
    assert other.drain() == 0
    for unit in other.fetch.retrieve_work(0) or []:
        other.processor.process(unit)


def test_composes_with_tenants_plain_jobs_and_pausing(worker: Worker, r: redis.Redis) -> None:
    push(worker, None, "t1", tenant="acme")
    push(worker, None, "plain")
    for i in range(3):
        push(worker, "k", f"c{i}", limit=1)
    assert take_all(worker, 10) and r.hget("rfetch:cap-held:q", "k") == b"1"
    assert worker.fetch.retrieve_work(10, exclude=["q"]) == []  # paused: nothing at all
    with pytest.raises(ConfigError, match="cannot be combined with tenant"):
        push(worker, "k", "x", tenant="acme")
    with pytest.raises(ConfigError, match="cannot be combined with key"):
        Step.set(concurrency_key="k", concurrency_limit=1, key="post:1")


def test_a_scheduled_capped_job_joins_its_key_when_due(worker: Worker, r: redis.Redis) -> None:
    Step.set(client=worker.client, concurrency_key="k", concurrency_limit=1).perform_in(100, "s")
    assert r.zcard("schedule") == 1
    make_due(r, "schedule")
    assert worker.poller.enqueue_due() == 1
    assert r.llen("rfetch:cap:q|k") == 1 and r.llen("queue:q") == 0
    assert worker.drain() == 1
    assert_clean(r)


def test_retry_now_from_the_api_goes_through_the_cap(worker: Worker, r: redis.Redis) -> None:
    FAIL.add("r0")
    jid = push(worker, "k", "r0", limit=1)
    worker.work_one()
    FAIL.clear()
    api = Api(worker.config, redis=worker.redis)
    assert api.retries.retry([jid]).done == 1
    assert r.llen("queue:q") == 0 and r.llen("rfetch:cap:q|k") == 1
    assert worker.drain() == 1
    assert_clean(r)


def test_a_lower_limit_takes_effect_for_the_next_fetch(worker: Worker, r: redis.Redis) -> None:
    for i in range(3):
        push(worker, "k", f"l{i}", limit=3)
    held = worker.fetch.retrieve_work(1)
    push(worker, "k", "l3", limit=1)  # the key is now full with one running
    assert r.lrange("rfetch:cap:q", 0, -1) == []
    assert take_all(worker) == []
    worker.processor.process(held[0])
    assert worker.drain() == 3
    assert_clean(r)


def test_bad_cap_options_are_refused_where_they_are_given(worker: Worker) -> None:
    for bad in ({"concurrency_key": "k"}, {"concurrency_limit": 2},
                {"concurrency_key": "k", "concurrency_limit": 0},
                {"concurrency_key": "a|b", "concurrency_limit": 1},
                {"concurrency_key": "k", "concurrency_limit": 1.5},
                {"expires_in": 0}, {"expires_in": "soon"}):
        with pytest.raises(ConfigError):
            Step.set(client=worker.client, **bad)


def test_a_key_of_the_wrong_type_is_refused_and_nothing_is_written(
    worker: Worker, r: redis.Redis
) -> None:
    r.set("rfetch:cap-held:q", "oops")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE rfetch:cap-held:q"):
        push(worker, "k", "w0")
    assert r.exists("rfetch:cap:q|k", "rfetch:cap:q", "queue:q") == 0


def test_clearing_a_queue_deletes_its_waiting_capped_jobs(worker: Worker, r: redis.Redis) -> None:
    for i in range(3):
        push(worker, "k", f"z{i}", limit=1)
    running = worker.take()
    Api(worker.config, redis=worker.redis).queue("q").clear()
    assert r.exists("rfetch:cap:q|k", "rfetch:cap:q") == 0
    worker.processor.process(running)  # finishes and gives its slot back
    assert_clean(r)
    push(worker, "k", "after", limit=1)
    assert worker.drain() == 1


def test_a_pushed_back_job_keeps_its_keys_limit(worker: Worker, r: redis.Redis) -> None:
    push(worker, "k", "only", limit=3)
    unit = worker.take()
    assert unit.requeue()  # the key's last job: its slot and its limit must not be lost
    assert r.hget("rfetch:cap-limits:q", "k") == b"3"
    for i in range(3):
        push(worker, "k", f"more{i}", limit=3)
    assert len(take_all(worker)) == 3
