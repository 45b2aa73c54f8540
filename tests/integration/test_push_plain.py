"""A plain push (plain jobs of one queue to run now, no size to check: the common
``perform_async``) goes to ``push_plain.lua`` instead of ``push.lua``: the same writes (LPUSH,
the queue's name in ``queues``, a wake-up on the queue's channel) and the same replies, all or
none, on the sync and the asyncio client. Real redis-server."""

from __future__ import annotations

import json

import pytest
import redis
import redis.asyncio

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.store.async_commands import AsyncCommands
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from rfetch.store.replies import Outgoing
from tests.support.aio import run_async


@pytest.fixture
def client(config: Config, r: redis.Redis) -> Client:
    return Client(config, r)


def jobs_of(queue: str, count: int) -> list[Outgoing]:
    return [Outgoing(queue, json.dumps({"class": "app.Plain", "args": [i], "jid": f"j{i}"}))
            for i in range(count)]


def dump(r: redis.Redis) -> dict[bytes, object]:
    """Every key with its value (lists, sets, strings)."""
    out: dict[bytes, object] = {}
    for key in r.keys("*"):
        kind = r.type(key)
        out[key] = (r.lrange(key, 0, -1) if kind == b"list" else r.smembers(key)
                    if kind == b"set" else r.get(key))
    return out


def test_a_plain_push_writes_what_push_lua_writes(r: redis.Redis) -> None:
    commands = Commands(r, Keys(None))
    pubsub = r.pubsub()
    pubsub.subscribe("queue:q")
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]
    assert commands.push(jobs_of("q", 3)) == [True, True, True]
    assert pubsub.get_message(timeout=5)["channel"] == b"queue:q"  # type: ignore[index]
    plain = dump(r)
    r.flushdb()
    # a size far above what is pushed: the same jobs through push.lua's records
    assert commands.push(jobs_of("q", 3), {"q": 10_000}) == [True, True, True]
    assert dump(r) == plain
    assert [json.loads(raw)["jid"] for raw in reversed(plain[b"queue:q"])] == [  # type: ignore[call-overload]
        "j0", "j1", "j2"]
    pubsub.close()


@pytest.mark.parametrize("known", [False, True])
def test_a_queue_of_another_type_refuses_the_push_and_changes_nothing(
    client: Client, r: redis.Redis, known: bool
) -> None:
    if known:
        r.sadd("queues", "broken")
    r.set("queue:broken", "not a list")
    before = dump(r)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE queue:broken is a string, not a "
                       "list: nothing was changed"):
        client.push("app.Plain", [1], {"queue": "broken"})
    assert dump(r) == before  # the name the SADD added is taken back; a known one stays


def test_a_queues_set_of_another_type_refuses_the_push_and_changes_nothing(
    client: Client, r: redis.Redis
) -> None:
    r.set("queues", "not a set")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE queues is a string, not a set"):
        client.push("app.Plain", [1], {"queue": "q"})
    assert set(r.keys("*")) == {b"queues"}


def test_the_async_client_takes_the_same_path(r: redis.Redis) -> None:
    commands = Commands(r, Keys(None))

    async def push(queue: str) -> list[bool]:
        aio = redis.asyncio.Redis(connection_pool=redis.asyncio.ConnectionPool(
            **r.connection_pool.connection_kwargs))
        try:
            return await AsyncCommands(aio, commands).push(jobs_of(queue, 2))
        finally:
            await aio.aclose()

    assert run_async(push("q")) == [True, True]
    plain = dump(r)
    r.flushdb()
    commands.push(jobs_of("q", 2))
    assert dump(r) == plain
    r.set("queue:broken", "not a list")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE queue:broken is a string"):
        run_async(push("broken"))
    assert r.smembers("queues") == {b"q"}
