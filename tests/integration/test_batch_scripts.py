"""The batch side of the scripts, called directly (no worker): a job acknowledged twice is
counted once, a failure then a success leaves no failure, a death fires once, events fire
in the call that makes them due, and a missing batch is left alone."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.jobs.payload import Routing
from rfetch.push.client import Client
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from rfetch.store.outcomes import JobOutcome
from tests.support.redis_server import RedisServer

PRIVATE = "queue:sq|host:1:abc|default"


class Step(rfetch.Job):
    def perform(self, n: int) -> None: ...


class Done(rfetch.Job):
    queue = "callbacks"

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None: ...


def make_batch(server: RedisServer, r: redis.Redis, count: int) -> tuple[rfetch.Batch,
                                                                         list[bytes]]:
    client = Client(Config(redis_url=server.url))
    batch = rfetch.Batch(on_success=Done, on_complete=(Done, {"e": "complete"}),
                         on_death=(Done, {"e": "death"}), client=client)
    with batch.jobs():
        for n in range(count):
            Step.set(client=client).perform_async(n)
    raws = [r.rpoplpush("queue:default", PRIVATE) for _ in range(count)]  # fetched
    return batch, [raw for raw in raws if raw is not None]


def ack(commands: Commands, raw: bytes, outcome: str = "ok", failure: str = "") -> bool:
    routing = Routing.parse(raw)
    assert routing is not None and routing.batched
    ending = {"ok": JobOutcome.SUCCEEDED, "dead": JobOutcome.DISCARDED}[outcome]
    return commands.finish(PRIVATE, "default", raw, routing, None, ending, failure)


def callbacks(r: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in r.lrange("queue:callbacks", 0, -1)]


def test_a_job_acknowledged_twice_counts_once(redis_server: RedisServer, r: redis.Redis) -> None:
    commands = Commands(r, Keys())
    batch, (first, second) = make_batch(redis_server, r, 2)
    r.lpush(PRIVATE, first)  # the same job twice in the private list (a duplicate push)
    assert ack(commands, first) and ack(commands, first)
    assert r.hget(f"b-{batch.bid}", "pending") == b"1"
    assert callbacks(r) == []  # not succeeded: the other job has not run
    assert ack(commands, second)
    assert r.hget(f"b-{batch.bid}", "pending") == b"0"
    assert [c["args"][1] for c in callbacks(r)][::-1] == [{"e": "complete"}, {}]


def test_an_acknowledgement_that_removes_nothing_counts_nothing(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    commands = Commands(r, Keys())
    batch, (first,) = make_batch(redis_server, r, 1)
    r.lrem(PRIVATE, 1, first)  # pushed back by recovery meanwhile: no longer ours
    assert not ack(commands, first)
    assert r.hget(f"b-{batch.bid}", "pending") == b"1" and callbacks(r) == []


def test_a_failure_then_a_success_and_a_death(redis_server: RedisServer, r: redis.Redis) -> None:
    commands = Commands(r, Keys())
    batch, (first, second) = make_batch(redis_server, r, 2)
    routing = Routing.parse(first)
    failure = json.dumps({"error_class": "ValueError", "error_message": "no"})
    assert commands.settle(PRIVATE, "default", first, "retry", 1.0, first, routing,
                           failure=failure)
    status = rfetch.BatchStatus(batch.bid, redis=r, keys=Keys())
    assert (status.pending, status.failures) == (2, 1)
    assert status.failure_info[0].error_class == "ValueError"
    # The retry runs and succeeds: no failure left.
    r.lpush(PRIVATE, first)
    assert ack(commands, first)
    status.refresh()
    assert (status.pending, status.failures) == (1, 0)
    # The other one dies: complete and death fire, once each, in that call.
    assert commands.settle(PRIVATE, "default", second, "dead", 2.0, second,
                           Routing.parse(second), failure=failure)
    status.refresh()
    assert status.complete and status.dead and not status.succeeded
    assert sorted(json.dumps(c["args"][1]) for c in callbacks(r)) == [
        '{"e": "complete"}', '{"e": "death"}'
    ]
    assert r.get("rfetch:batches-died") == b"1"


def test_a_missing_batch_is_left_alone(redis_server: RedisServer, r: redis.Redis) -> None:
    commands = Commands(r, Keys())
    batch, (first,) = make_batch(redis_server, r, 1)
    for key in r.keys(f"b-{batch.bid}*"):
        r.delete(key)  # expired
    assert ack(commands, first)
    assert r.keys("b-*") == [] and r.llen(PRIVATE) == 0


def test_a_sidekiq_pro_batch_is_left_alone(redis_server: RedisServer, r: redis.Redis) -> None:
    commands = Commands(r, Keys())
    batch, (first,) = make_batch(redis_server, r, 1)
    r.hdel(f"b-{batch.bid}", "engine")  # as Sidekiq Pro writes its own "b-<bid>" hash
    assert ack(commands, first)
    assert r.hget(f"b-{batch.bid}", "pending") == b"1" and callbacks(r) == []
    client = Client(Config(redis_url=redis_server.url))
    with pytest.raises(rfetch.BatchError, match="not an rfetch batch"), \
            rfetch.Batch.reopen(batch.bid, client=client).jobs():
        Step.set(client=client).perform_async(2)


def test_a_kill_by_hand_from_the_retry_set_is_a_death(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    from rfetch.api import Api

    commands = Commands(r, Keys())
    batch, (first, second) = make_batch(redis_server, r, 2)
    failed = json.loads(first)
    failed.update(error_class="ValueError", error_message="no", retry_count=0)
    stored = json.dumps(failed)
    failure = json.dumps({"error_class": "ValueError", "error_message": "no"})
    assert commands.settle(PRIVATE, "default", first, "retry", 9e9, stored, Routing.parse(first),
                           failure=failure)
    assert ack(commands, second)
    api = Api(Config(redis_url=redis_server.url), redis=r)
    assert api.retries.kill([failed["jid"]]).done == 1
    status = rfetch.BatchStatus(batch.bid, redis=r, keys=Keys())
    assert status.dead and status.complete and not status.succeeded
    assert r.sismember(f"b-{batch.bid}-died", failed["jid"])
    assert sorted(json.dumps(c["args"][1]) for c in callbacks(r)) == [
        '{"e": "complete"}', '{"e": "death"}'
    ]
    assert r.zcard("dead") == 1


def test_an_over_limit_reschedule_is_not_a_failure(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    commands = Commands(r, Keys())
    batch, (first,) = make_batch(redis_server, r, 1)
    assert commands.settle(PRIVATE, "default", first, "schedule", 9e9, first,
                           Routing.parse(first), failure='{"error_class": "rfetch.OverLimit"}')
    status = rfetch.BatchStatus(batch.bid, redis=r, keys=Keys())
    assert (status.pending, status.failures, status.complete) == (1, 0, False)
