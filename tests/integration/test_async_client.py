"""The asyncio client (``aperform_async`` and friends) against a real redis-server: the same
payloads, scripts, checks, middleware, sink and reliable-push buffer as the sync client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
import redis

import rfetch
from rfetch import testing
from rfetch.config import Config
from rfetch.jobs.payload import Payload
from tests.support.aio import run_async
from tests.support.redis_server import RedisServer

EVENTS: list[Any] = []


class Welcome(rfetch.Job):
    queue = "mail"

    def perform(self, user_id: int, template: str = "welcome") -> None:
        EVENTS.append(("welcome", user_id))


class ByPost(rfetch.Job):
    def ordering_key(self, post_id: int) -> str:
        return f"post:{post_id}"

    async def perform(self, post_id: int) -> None:
        await asyncio.sleep(0)
        EVENTS.append(("post", post_id))


@rfetch.job(queue="fn")
async def notify(user_id: int) -> None:
    EVENTS.append(("notify", user_id))


@pytest.fixture(autouse=True)
def _client(config: Config) -> Any:
    EVENTS.clear()
    previous = rfetch.push.client.DEFAULT.swap(rfetch.Client(config))
    yield
    rfetch.push.client.DEFAULT.swap(previous)


def jobs(r: redis.Redis, key: str) -> list[Payload]:
    return [json.loads(raw) for raw in reversed(r.lrange(key, 0, -1))]


def test_the_same_payloads_as_the_sync_client(r: redis.Redis) -> None:
    async def push() -> list[str | None]:
        return [
            await Welcome.aperform_async(42, template="hi"),
            await Welcome.set(queue="critical").aperform_async(7),
            await notify.aperform_async(3),
        ]

    first, second, third = run_async(push())
    sync_jid = Welcome.perform_async(42, template="hi")
    [a, b] = jobs(r, "queue:mail")
    assert a["jid"] == first and b["jid"] == sync_jid
    assert {k: v for k, v in a.items() if k not in ("jid", "created_at", "enqueued_at")} == {
        k: v for k, v in b.items() if k not in ("jid", "created_at", "enqueued_at")
    }
    assert jobs(r, "queue:critical")[0]["jid"] == second
    assert jobs(r, "queue:fn")[0] == {**jobs(r, "queue:fn")[0], "jid": third, "args": [3]}
    assert r.smembers("queues") == {b"mail", b"critical", b"fn"}


def test_scheduled_bulk_keyed_and_unique(r: redis.Redis) -> None:
    async def push() -> tuple[Any, ...]:
        later = await Welcome.aperform_in(60, 1)
        at = await Welcome.aperform_at(4_000_000_000.0, 2)
        bulk = await Welcome.aperform_bulk([[i] for i in range(2500)])
        keyed = [await ByPost.aperform_async(9) for _ in range(3)]
        unique = [await Welcome.set(unique_for=60).aperform_async(5) for _ in range(2)]
        return later, at, bulk, keyed, unique

    later, at, bulk, keyed, unique = run_async(push())
    scores = dict(r.zrange("schedule", 0, -1, withscores=True))
    assert sorted(json.loads(raw)["jid"] for raw in scores) == sorted([later, at])
    assert 4_000_000_000.0 in scores.values()
    assert len(bulk) == 2500 and r.llen("queue:mail") == 2500 + 1
    # One holder in the queue, the others waiting in the key's list (push.lua).
    assert [j["jid"] for j in jobs(r, "queue:default")] == keyed[:1]
    assert r.llen("rfetch:key:default:post:9") == 2
    assert unique[0] is not None and unique[1] is None  # the lock is held


def test_checks_and_middleware_apply(config: Config, r: redis.Redis) -> None:
    def tag(job_class: str, job: Payload, queue: str, redis: Any,
            call_next: Callable[[], Payload | None]) -> Payload | None:
        if job["args"][0] == 0:
            return None
        job["tags"] = ["async"]
        return call_next()

    client = rfetch.Client(config.replace(client_middleware=[tag]))

    async def push() -> list[str | None]:
        with pytest.raises(rfetch.ArgsNotSerializable):
            await Welcome.set(client=client).aperform_async(object())  # type: ignore[arg-type]
        return [await Welcome.set(client=client).aperform_async(n) for n in (0, 1)]

    dropped, kept = run_async(push())
    assert dropped is None
    assert [(j["jid"], j["tags"]) for j in jobs(r, "queue:mail")] == [(kept, ["async"])]


def test_pushes_while_redis_is_down_are_buffered_and_delivered_in_order(
    own_redis: RedisServer,
) -> None:
    client = rfetch.Client(Config(redis_url=own_redis.url, network_timeout=1.0,
                                  block_timeout=0.5))

    async def push(values: range) -> list[str | None]:
        return [await Welcome.set(client=client).aperform_async(n) for n in values]

    run_async(push(range(0, 2)))
    own_redis.stop()
    buffered = run_async(push(range(2, 12)))
    assert all(isinstance(jid, str) for jid in buffered)
    assert client.pending() == 10
    own_redis.start()
    run_async(push(range(12, 14)))  # goes after the buffered ones
    assert client.pending() == 0
    queued = jobs(own_redis.client(), "queue:mail")
    assert [j["args"][0] for j in queued] == list(range(14))


def test_each_event_loop_gets_its_own_connection(r: redis.Redis) -> None:
    for n in range(3):  # a fresh loop each time, as a test suite running each test in one
        run_async(Welcome.aperform_async(n))
    assert r.llen("queue:mail") == 3


def test_fake_and_inline_modes_take_async_pushes(r: redis.Redis) -> None:
    async def scenario() -> None:
        with testing.fake() as queues:
            await Welcome.aperform_async(1)
            await notify.aperform_async(2)
            assert len(queues) == 2
            assert await queues.adrain() == 2
        with testing.inline():
            await ByPost.aperform_async(3)  # an async job, awaited in this loop

    run_async(scenario())
    assert EVENTS == [("welcome", 1), ("notify", 2), ("post", 3)]
    assert r.dbsize() == 0  # nothing reached Redis
