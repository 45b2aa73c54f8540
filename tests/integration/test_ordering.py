"""Ordering keys and unique jobs, step by step against a real redis-server.

The worker's parts run in this process (fetch, ``Processor.process``, ``Poller``,
``OrphanRecovery``, ``rfetch.api``) so each state of the key gate can be checked in Redis:
``rfetch:key-holders:<q>`` (key -> holder jid), ``rfetch:key:<q>:<key>`` (waiting jobs) and
the public queue. The real-process tests are in ``test_ordering_workers.py``.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
import redis

from rfetch.api import Api
from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError
from rfetch.jobs.job import RetryDecision
from rfetch.store.keys import Keys
from rfetch.worker.registry import Registry
from rfetch.worker.unit import UnitOfWork
from tests.support.gate_worker import (
    FAIL,
    JOBS,
    RAN,
    ByPost,
    Skipper,
    Step,
    Worker,
    holder,
    make_due,
    push,
    queue_jids,
    waiting,
)
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

pytestmark = pytest.mark.usefixtures("clear_runs")


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"key": 7}, "key (ordering key) must be a non-empty string"),
        ({"key": ""}, "key (ordering key) must be a non-empty string"),
        ({"key": "x" * 1001}, "at most 1000"),
        ({"key": "a", "retry_queue": "other"}, "retry_queue cannot be used"),
        ({"unique_for": 0}, "unique_for must be a positive number"),
        ({"unique_for": "10"}, "unique_for must be a positive number"),
        ({"unique_for": True}, "unique_for must be a positive number"),
        ({"unique_key": "k"}, "unique_key needs unique_for"),
        ({"unique_for": 5, "unique_key": 3}, "unique_key must be a non-empty string"),
    ],
)
def test_bad_options_raise_and_write_nothing(
    worker: Worker, r: redis.Redis, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Step.set(client=worker.client, **options).perform_async(1)
    assert r.dbsize() == 0


def test_bad_class_level_key_raises_at_push(worker: Worker, r: redis.Redis) -> None:
    class BadKey(Step):
        def ordering_key(self, *args: Any) -> str | None:
            return 42  # type: ignore[return-value]

    with pytest.raises(ConfigError, match="must be a non-empty string"):
        BadKey.set(client=worker.client).perform_async(1)
    assert r.dbsize() == 0


# -- the gate --------------------------------------------------------------------------------


def test_one_job_per_key_is_out_and_the_rest_wait_in_push_order(
    worker: Worker, r: redis.Redis
) -> None:
    a1, a2, a3 = (push(worker, "a", i) for i in range(3))
    b1 = push(worker, "b", 10)
    plain = push(worker, None, 99)
    assert queue_jids(r) == [a1, b1, plain]
    assert waiting(r, "a") == [a2, a3]
    assert holder(r, "a") == a1 and holder(r, "b") == b1
    payload = json.loads(r.lrange("queue:q", -1, -1)[0])
    assert payload["ordering_key"] == "a"


def test_ack_releases_the_key_to_its_next_job_in_order(worker: Worker, r: redis.Redis) -> None:
    jids = [push(worker, "a", i) for i in range(4)]
    assert worker.drain() == 4
    assert RAN == [("Step", [0]), ("Step", [1]), ("Step", [2]), ("Step", [3])]
    assert holder(r, "a") is None
    assert r.exists("rfetch:key:q:a", "queue:q", "rfetch:key-leases:q") == 0
    assert r.llen(worker.fetch.private_key("q")) == 0
    assert len(jids) == 4


def test_keys_run_in_parallel(worker: Worker, r: redis.Redis) -> None:
    push(worker, "a", 1)
    push(worker, "b", 2)
    units = worker.fetch.retrieve_work(10)
    assert len(units) == 2  # both keys' heads are out at once


def test_a_failed_job_blocks_its_key_until_its_retry_succeeds(
    worker: Worker, r: redis.Redis
) -> None:
    FAIL.add(0)
    first = push(worker, "a", 0)
    second = push(worker, "a", 1)
    worker.work_one()
    assert r.zcard("retry") == 1
    assert holder(r, "a") == first  # still blocked by the failed job
    assert queue_jids(r) == [] and waiting(r, "a") == [second]
    assert r.zcard("rfetch:key-leases:q") == 0  # visible in the retry set, no lease
    # A push meanwhile waits too.
    third = push(worker, "a", 2)
    assert waiting(r, "a") == [second, third]
    FAIL.clear()
    make_due(r, "retry")
    assert worker.poller.enqueue_due() == 1
    assert queue_jids(r) == [first]  # the holder goes out again, ahead of the others
    assert worker.drain() == 3
    assert [args for _, args in RAN] == [[0], [0], [1], [2]]
    assert holder(r, "a") is None


def test_skip_policy_lets_later_jobs_go_on_and_the_retry_waits_its_turn(
    worker: Worker, r: redis.Redis
) -> None:
    FAIL.add(0)
    first = push(worker, "a", 0, cls=Skipper)
    second = push(worker, "a", 1, cls=Skipper)
    third = push(worker, "a", 2, cls=Skipper)
    worker.work_one()
    assert r.zcard("retry") == 1
    assert holder(r, "a") == second and queue_jids(r) == [second]
    worker.work_one()  # second runs; third now holds the key
    assert holder(r, "a") == third
    FAIL.clear()
    make_due(r, "retry")
    worker.poller.enqueue_due()
    assert waiting(r, "a") == [first]  # the retry lost its place: behind third
    worker.drain()
    assert [args for _, args in RAN] == [[0], [1], [2], [0]]


@pytest.mark.parametrize("retry", [0, False])
def test_death_releases_the_key(worker: Worker, r: redis.Redis, retry: Any) -> None:
    FAIL.add(0)
    push(worker, "a", 0, retry=retry)
    second = push(worker, "a", 1)
    worker.work_one()
    assert r.zcard("dead") == (0 if retry is False else 1)
    assert holder(r, "a") == second and queue_jids(r) == [second]


def test_discard_by_retry_in_releases_the_key(worker: Worker, r: redis.Redis) -> None:
    class Discards(Step):
        def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> RetryDecision:
            return "discard"

    worker.processor.registry = Registry([*JOBS, Discards])
    FAIL.add(0)
    push(worker, "a", 0, cls=Discards)
    second = push(worker, "a", 1)
    worker.work_one()
    assert holder(r, "a") == second


def test_class_level_ordering_key_and_bulk_push(worker: Worker, r: redis.Redis) -> None:
    ByPost.set(client=worker.client).perform_async(1, "x")
    jids = ByPost.set(client=worker.client).perform_bulk([[1, "y"], [2, "z"], [1, "w"]])
    assert len(jids) == 3
    assert len(queue_jids(r)) == 2  # post:1 (first) and post:2
    assert len(waiting(r, "post:1")) == 2
    worker.drain()
    assert [args for name, args in RAN if args[0] == 1] == [[1, "x"], [1, "y"], [1, "w"]]


def test_scheduled_keyed_job_meets_the_gate_when_due(worker: Worker, r: redis.Redis) -> None:
    first = push(worker, "a", 0)
    later = Step.set(client=worker.client, key="a").perform_in(3600, 1)
    assert r.zcard("schedule") == 1 and holder(r, "a") == first
    make_due(r, "schedule")
    worker.poller.enqueue_due()
    assert waiting(r, "a") == [later]
    worker.drain()
    assert [args for _, args in RAN] == [[0], [1]]


def test_namespace_prefixes_every_gate_key(redis_server: RedisServer, r: redis.Redis) -> None:
    w = Worker(Config(redis_url=redis_server.url, queues=[QueueSpec("q")], namespace="ns"))
    first = push(w, "a", 0)
    second = push(w, "a", 1)
    assert holder(r, "a", ns="ns:") == first and waiting(r, "a", ns="ns:") == [second]
    w.drain()
    assert [args for _, args in RAN] == [[0], [1]]
    assert r.keys("*") and all(k.startswith(b"ns:") for k in r.keys("*"))
    assert holder(r, "a", ns="ns:") is None


# -- push-back and recovery -------------------------------------------------------------------


def test_push_back_keeps_the_holder_first_and_a_follower_at_the_head_of_its_key(
    worker: Worker, r: redis.Redis
) -> None:
    first = push(worker, "a", 0)
    second = push(worker, "a", 1)
    third = push(worker, "a", 2)
    other = push(worker, None, 9)
    unit = worker.take()
    assert worker.fetch.requeue([unit]) == 1
    assert queue_jids(r) == [first, other]  # back at the head
    # A job of the key that does not hold it (as a coalesced follower would be) goes back
    # to the head of the key's list, not to the queue.
    raw = r.rpop("rfetch:key:q:a")
    r.lpush(worker.fetch.private_key("q"), raw)
    stray = worker.fetch.unit("q", raw)
    assert worker.fetch.requeue([stray]) == 1
    assert waiting(r, "a") == [second, third]
    assert holder(r, "a") == first


def test_orphan_recovery_returns_a_keyed_job_to_the_head_still_holding_its_key(
    cfg: Config, worker: Worker, r: redis.Redis
) -> None:
    first, second = hold_running(worker, "a")  # its heartbeat wrote the lease
    assert r.zrange("rfetch:key-leases:q", 0, -1) == [f"{first}:a".encode()]
    recovery = worker.other_process()
    assert recovery.reap(worker.identity, ["q"]) == 1
    assert queue_jids(r) == [first] and holder(r, "a") == first
    assert waiting(r, "a") == [second]
    assert r.zcard("rfetch:key-leases:q") == 0


# -- stuck-key rescue ---------------------------------------------------------------------------


def test_rescue_releases_a_key_whose_running_holder_vanished(
    cfg: Config, worker: Worker, r: redis.Redis
) -> None:
    first, second = hold_running(worker, "a")
    recovery = worker.other_process()
    now = time.time()
    # Lease not expired yet: nothing happens.
    assert recovery.rescue.rescue_keys(now) == 0
    # A stale lease (a heartbeat raced an ack) of a jid that does not hold the key: dropped.
    r.zadd("rfetch:key-leases:q", {"0123:a": 1.0})
    assert recovery.rescue.rescue_keys(now) == 0
    assert r.zscore("rfetch:key-leases:q", "0123:a") is None
    # Expired, but the holder is still in a private list (a stalled heartbeat): kept.
    r.zadd("rfetch:key-leases:q", {f"{first}:a": 1.0})
    r.hset("rfetch:identities", worker.identity, json.dumps(["q"]))
    assert recovery.rescue.rescue_keys(now) == 0
    assert holder(r, "a") == first
    # The holder vanishes (deleted by a tool outside rfetch): the key is released.
    r.delete(worker.fetch.private_key("q"))
    assert recovery.rescue.rescue_keys(now) == 1
    assert holder(r, "a") == second and queue_jids(r) == [second]


def beat(w: Worker, unit: UnitOfWork) -> None:
    """What the heartbeat writes for a running keyed job: its lease."""
    pipe = w.redis.pipeline(transaction=False)
    w.fetch.write_leases(pipe, [unit])
    pipe.execute()


def hold_running(w: Worker, key: str) -> tuple[str, str]:
    """Two jobs of ``key``: the first taken, through the gate and beating (its heartbeat
    wrote the lease), as a running holder; the second waiting behind it."""
    first = push(w, key, 0)
    second = push(w, key, 1)
    unit = w.take()
    beat(w, unit)
    return first, second


def unit_jid(unit: UnitOfWork) -> str:
    jid: str = json.loads(unit.raw)["jid"]
    return jid


# -- API actions keep the gate consistent -------------------------------------------------------


@pytest.fixture
def api(cfg: Config, worker: Worker) -> Api:
    return Api(cfg, redis=worker.redis)


def test_retry_now_of_the_blocking_job_sends_it_out(
    worker: Worker, r: redis.Redis, api: Api
) -> None:
    FAIL.add(0)
    first = push(worker, "a", 0)
    push(worker, "a", 1)
    worker.work_one()
    FAIL.clear()
    assert api.retries.retry([first]).done == 1
    assert queue_jids(r) == [first] and holder(r, "a") == first
    worker.drain()
    assert [args for _, args in RAN] == [[0], [0], [1]]


@pytest.mark.parametrize("action", ["delete", "kill"])
def test_delete_or_kill_of_the_blocking_job_unblocks_the_key(
    worker: Worker, r: redis.Redis, api: Api, action: str
) -> None:
    FAIL.add(0)
    first = push(worker, "a", 0)
    second = push(worker, "a", 1)
    worker.work_one()
    assert api.retries.apply(action, [first]).done == 1
    assert holder(r, "a") == second and queue_jids(r) == [second]
    assert r.zcard("dead") == (1 if action == "kill" else 0)


def test_retry_from_the_dead_set_waits_behind_the_current_holder(
    worker: Worker, r: redis.Redis, api: Api
) -> None:
    FAIL.add(0)
    first = push(worker, "a", 0, retry=0)
    second = push(worker, "a", 1)
    worker.work_one()  # dead: key released to second
    FAIL.clear()
    assert api.dead.retry([first]).done == 1
    assert holder(r, "a") == second and waiting(r, "a") == [first]


def test_deleting_the_holder_from_the_queue_releases_the_key(
    worker: Worker, r: redis.Redis, api: Api
) -> None:
    first = push(worker, "a", 0)
    second = push(worker, "a", 1)
    assert api.queue("q").delete([first]).done == 1
    assert queue_jids(r) == [second] and holder(r, "a") == second


def test_clearing_a_queue_removes_its_gate(worker: Worker, r: redis.Redis, api: Api) -> None:
    push(worker, "a", 0)
    push(worker, "a", 1)
    push(worker, "b", 2)
    assert api.queue("q").clear() == 2
    assert r.exists("rfetch:key-holders:q", "rfetch:key:q:a", "queue:q") == 0
    push(worker, "a", 3)
    worker.drain()
    assert [args for _, args in RAN] == [[3]]


# -- unique jobs ---------------------------------------------------------------------------------


def test_unique_push_returns_none_and_writes_nothing_while_held(
    worker: Worker, r: redis.Redis
) -> None:
    setter = Step.set(client=worker.client, unique_for=60)
    first = setter.perform_async(1, {"b": 2, "a": 1})
    assert first is not None
    before = {k: r.dump(k) for k in r.keys("*")}
    assert setter.perform_async(1, {"a": 1, "b": 2}) is None  # same args, other dict order
    assert {k: r.dump(k) for k in r.keys("*")} == before
    assert setter.perform_async(2) is not None  # other args: another lock
    assert r.llen("queue:q") == 2


def test_unique_lock_survives_a_retry_and_is_released_on_success(
    worker: Worker, r: redis.Redis
) -> None:
    setter = Step.set(client=worker.client, unique_for=60)
    FAIL.add(5)
    assert setter.perform_async(5) is not None
    worker.work_one()
    assert r.zcard("retry") == 1
    assert setter.perform_async(5) is None  # still held while it waits to retry
    FAIL.clear()
    make_due(r, "retry")
    worker.poller.enqueue_due()
    worker.work_one()
    assert setter.perform_async(5) is not None  # released on success


def test_unique_lock_released_on_death_and_by_explicit_key(worker: Worker, r: redis.Redis) -> None:
    FAIL.add(7)
    setter = Step.set(client=worker.client, unique_for=60, unique_key="order-7", retry=0)
    assert setter.perform_async(7) is not None
    assert setter.perform_async(8) is None  # same unique_key, other args
    worker.work_one()
    assert r.zcard("dead") == 1
    assert setter.perform_async(8) is not None


def test_unique_lock_expires_after_its_window(worker: Worker, r: redis.Redis) -> None:
    setter = Step.set(client=worker.client, unique_for=0.2)
    assert setter.perform_async(1) is not None
    assert setter.perform_async(1) is None
    wait_for(lambda: setter.perform_async(1) is not None, 60, "the unique lock to expire")


def test_unique_bulk_push_leaves_out_held_jobs(worker: Worker, r: redis.Redis) -> None:
    jids = Step.set(client=worker.client, unique_for=60).perform_bulk([[1], [2], [1]])
    assert len(jids) == 2 and r.llen("queue:q") == 2


def test_unique_class_attribute(worker: Worker, r: redis.Redis) -> None:
    class Once(Step):
        unique_for = 60

    assert Once.set(client=worker.client).perform_async(1) is not None
    assert Once.set(client=worker.client).perform_async(1) is None


def test_keys_py_names_match_the_names_lua_computes(worker: Worker, r: redis.Redis) -> None:
    """lib/gate.lua builds key names from the prefix; keys.py must give the same ones."""
    keys = Keys("ns")
    w = Worker(Config(redis_url=worker.config.redis_url, queues=[QueueSpec("q")], namespace="ns"))
    push(w, "a", 0)
    push(w, "a", 1)
    push(w, None, 2, tenant="t")
    push(w, None, 2, tenant="t")
    Step.set(client=w.client, unique_for=60).perform_async(3)
    for unit in w.fetch.retrieve_work(2):  # one tenant job, then the holder of "a"
        beat(w, unit)
    expected = {
        keys.key_holders("q"), keys.key_list("q", "a"), keys.key_leases("q"),
        keys.fair_ring("q"), keys.fair_tenant("q", "t"), keys.fair_wake("q"), keys.fair_queues,
    }
    assert expected <= {k.decode() for k in r.keys("ns:rfetch:*")}
    assert any(k.startswith(b"ns:rfetch:unique:") for k in r.keys("*"))
    assert keys.key_list_pattern("a*b") == "ns:rfetch:key:a\\*b:*"


def test_a_deferred_ack_releases_the_key_and_the_same_fetch_takes_the_next_job(
    worker: Worker, r: redis.Redis
) -> None:
    """A keyed job's acknowledgement rides on the next fetch as plain ones do (fetch.lua
    releases the key), so the key's next job can come back in that very call."""
    push(worker, "a", 0)
    second = push(worker, "a", 1)
    Step.set(client=worker.client, unique_for=60).perform_async(7)
    units = worker.fetch.retrieve_work(2)
    assert [u.routing is not None and u.routing.locking for u in units] == [True, True]
    fetched = worker.fetch.retrieve_work(5, acks=units)
    assert [unit_jid(u) for u in fetched] == [second]
    assert holder(r, "a") == second
    assert Step.set(client=worker.client, unique_for=60).perform_async(7) is not None
    assert r.llen(worker.fetch.private_key("q")) == 1


def test_a_bad_key_on_failure_policy_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(ConfigError, match='key_on_failure must be "block" or "skip"'):

        class Wrong(Step):
            key_on_failure = "skipp"  # type: ignore[assignment]
