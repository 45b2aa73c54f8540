"""Reliable push: jobs pushed while Redis is down are kept, in order, and delivered."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import rfetch
from rfetch.config import Config
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for


def client_for(server: RedisServer, **fields: object) -> rfetch.Client:
    return rfetch.Client(
        Config(redis_url=server.url, network_timeout=1.0, block_timeout=0.5, **fields)  # type: ignore[arg-type]
    )


def queued_args(server: RedisServer, queue: str = "default") -> list[object]:
    # LPUSH puts the newest at the left: reverse for push order.
    raws = server.client().lrange(f"queue:{queue}", 0, -1)
    return [json.loads(raw)["args"][0] for raw in reversed(raws)]


def test_pushes_during_an_outage_are_delivered_in_order(own_redis: RedisServer) -> None:
    client = client_for(own_redis)
    client.push("X", [0])
    own_redis.stop()
    jids = [client.push("X", [i]) for i in range(1, 50)]
    assert all(isinstance(jid, str) and len(jid) == 24 for jid in jids)
    assert client.pending() == 49
    own_redis.start()
    client.push("X", [50])  # the next push drains the buffer first
    assert client.pending() == 0
    assert queued_args(own_redis) == list(range(51))


def test_background_retry_delivers_without_another_push(own_redis: RedisServer) -> None:
    client = client_for(own_redis)
    own_redis.stop()
    client.push("X", [1])
    own_redis.start()
    wait_for(lambda: client.pending() == 0, 15, "the background retry to deliver")
    assert queued_args(own_redis) == [1]


def test_full_buffer_raises_and_accepts_nothing_more(own_redis: RedisServer) -> None:
    client = client_for(own_redis, push_buffer_size=3)
    own_redis.stop()
    for i in range(3):
        client.push("X", [i])
    with pytest.raises(rfetch.BufferFull, match="holds 3 of 3 jobs"):
        client.push("X", [3])
    with pytest.raises(rfetch.BufferFull):
        client.push_bulk("X", [[4], [5]])
    assert client.pending() == 3
    own_redis.start()
    assert client.flush(10) == 0
    assert queued_args(own_redis) == [0, 1, 2]


def test_scheduled_push_keeps_its_time(own_redis: RedisServer) -> None:
    client = client_for(own_redis)
    at = time.time() + 3600
    own_redis.stop()
    client.push("X", [1], at=at)
    own_redis.start()
    assert client.flush(10) == 0
    [(raw, score)] = own_redis.client().zrange("schedule", 0, -1, withscores=True)
    assert score == pytest.approx(at)
    assert "at" not in json.loads(raw)


def test_spool_survives_a_new_client(own_redis: RedisServer, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    first = client_for(own_redis, push_spool=str(spool))
    own_redis.stop()
    jids = [first.push("X", [i]) for i in range(5)]
    assert first.pending() == 5
    del first  # as if the process had ended during the outage
    own_redis.start()
    second = client_for(own_redis, push_spool=str(spool))
    wait_for(lambda: second.pending() == 0, 15, "the new client to deliver the spool")
    raws = own_redis.client().lrange("queue:default", 0, -1)
    assert [json.loads(r)["jid"] for r in reversed(raws)] == jids


def test_unusable_spool_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(rfetch.ConfigError, match="cannot use push spool folder"):
        rfetch.Client(Config(push_spool=str(blocker / "spool")))
