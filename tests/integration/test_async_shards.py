"""The asyncio client with ``Config.shards``: each job goes to its queue's shard, as with
the sync client, and a shard that is down buffers only its own jobs."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import rfetch
from rfetch.config import Config
from tests.support.aio import run_async
from tests.support.redis_server import RedisServer
from tests.support.shards import two_servers


@pytest.fixture
def servers() -> Iterator[tuple[RedisServer, RedisServer]]:
    with two_servers() as pair:
        yield pair


def sharded(first: RedisServer, second: RedisServer) -> rfetch.Client:
    return rfetch.Client(Config(
        shards=[first.url, second.url], shard_map={"mail": 0, "reports": 1},
        network_timeout=1.0, block_timeout=0.5,
    ))


def queued(server: RedisServer, queue: str) -> list[object]:
    return [json.loads(raw)["args"][0]
            for raw in reversed(server.client().lrange(f"queue:{queue}", 0, -1))]


def test_async_pushes_go_to_their_queues_shard(
    servers: tuple[RedisServer, RedisServer],
) -> None:
    first, second = servers
    client = sharded(first, second)

    async def push() -> list[str]:
        await client.aio.push("Mail", [1], {"queue": "mail"})
        await client.aio.push("Report", [2], {"queue": "reports"})
        return await client.aio.push_bulk(
            "Any", [[3], [4], [5]],
            options_for=lambda args: {"queue": "mail" if args[0] % 2 else "reports"},
        )

    jids = run_async(push())
    assert len(jids) == 3
    assert queued(first, "mail") == [1, 3, 5]
    assert queued(second, "reports") == [2, 4]
    assert not first.client().exists("queue:reports")
    assert not second.client().exists("queue:mail")
    assert client.pending() == 0


def test_a_shard_that_is_down_buffers_only_its_own_jobs(
    servers: tuple[RedisServer, RedisServer],
) -> None:
    first, second = servers
    client = sharded(first, second)
    run_async(client.aio.push("Warm", [0], {"queue": "reports"}))
    second.stop()

    async def push() -> tuple[str | None, str | None]:
        return (await client.aio.push("Report", [1], {"queue": "reports"}),
                await client.aio.push("Mail", [2], {"queue": "mail"}))

    report_jid, mail_jid = run_async(push())
    assert report_jid is not None and mail_jid is not None
    assert queued(first, "mail") == [2]  # the other shard goes on
    assert client.pending() == 1  # the report waits in its shard's buffer, not lost
    second.start()
    assert client.flush(15) == 0
    assert queued(second, "reports") == [0, 1]
