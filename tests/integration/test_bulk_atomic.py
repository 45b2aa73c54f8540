"""``push_bulk`` / ``perform_bulk`` against Redis reply errors in the middle of a bulk: the call
writes every job or none (one ``push.lua`` call), so the caller either has every jid or an
exception and nothing to undo; with a ``batch_size``, a refused batch raises
:class:`BulkPushError` naming exactly the jobs written. Real redis-servers: a key of the wrong
type on the way of one job, and a Redis that reaches ``maxmemory`` part-way."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
import redis

from rfetch.config import Config
from rfetch.errors import BulkPushError
from rfetch.push.client import Client
from tests.support.aio import run_async
from tests.support.redis_server import RedisServer


def queue_jids(r: redis.Redis, queue: str) -> list[str]:
    """jids of a queue's jobs in push order."""
    return [json.loads(raw)["jid"] for raw in reversed(r.lrange(f"queue:{queue}", 0, -1))]


def to_queue_named_in_args(args: Sequence[Any]) -> dict[str, Any]:
    return {"queue": args[0]}


@pytest.fixture
def client(config: Config, r: redis.Redis) -> Client:
    return Client(config, r)


def test_a_job_refused_mid_bulk_writes_no_job_of_the_call(client: Client, r: redis.Redis) -> None:
    # 1,500 jobs: more than Sidekiq's 1,000 per round trip; job 1,200 goes to a queue whose
    # key is a string, so Redis refuses it.
    r.set("queue:broken", "not a list")
    args_list = [["fine", i] for i in range(1500)]
    args_list[1200] = ["broken", 1200]
    with pytest.raises(redis.ResponseError) as caught:
        client.push_bulk("app.Bulk", args_list, options_for=to_queue_named_in_args)
    assert set(r.keys("*")) == {b"queue:broken"}  # nothing else: no job, no "queues" entry
    assert "WRONGTYPE queue:broken is a string" in str(caught.value)

    r.delete("queue:broken")  # fixed: the same call again writes each job once
    jids = client.push_bulk("app.Bulk", args_list, options_for=to_queue_named_in_args)
    assert len(set(jids)) == 1500
    assert queue_jids(r, "fine") + queue_jids(r, "broken") == jids[:1200] + jids[1201:] + [
        jids[1200]
    ]


def test_a_batch_refused_after_others_names_exactly_the_jobs_written(
    client: Client, r: redis.Redis
) -> None:
    r.set("queue:broken", "not a list")
    args_list = [["fine", i] for i in range(10)]
    args_list[5] = ["broken", 5]
    with pytest.raises(BulkPushError) as caught:
        client.push_bulk(
            "app.Bulk", args_list, options_for=to_queue_named_in_args, batch_size=4
        )
    error = caught.value
    assert isinstance(error.__cause__, redis.ResponseError)
    assert error.written == 4  # args_list[:4], the first batch; the second held the bad one
    assert queue_jids(r, "fine") == error.jids
    assert len(error.jids) == 4
    assert r.get("queue:broken") == b"not a list"


def test_a_bulk_that_reaches_maxmemory_part_way_is_written_whole_or_not_at_all(
    own_redis: RedisServer,
) -> None:
    r = own_redis.client()
    used = int(r.info("memory")["used_memory"])
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", used + 600_000)  # room for about two thirds of the call
    client = Client(Config(redis_url=own_redis.url), r)
    args_list = [["x" * 200, i] for i in range(3000)]  # about 900 kB of payloads
    try:
        jids = client.push_bulk("app.Bulk", args_list)
    except redis.exceptions.OutOfMemoryError:
        assert r.exists("queue:default") == 0  # refused: nothing written
    else:
        assert queue_jids(r, "default") == jids  # accepted: every job, once
        assert len(jids) == 3000
    r.close()


def test_an_async_bulk_refused_mid_call_writes_no_job_and_batches_name_what_was_written(
    client: Client, r: redis.Redis
) -> None:
    # The asyncio client builds the same push.lua call as the sync one and only awaits it.
    r.set("queue:broken", "not a list")
    args_list = [["fine", i] for i in range(10)]
    args_list[5] = ["broken", 5]

    async def whole() -> list[str]:
        return await client.aio.push_bulk(
            "app.Bulk", args_list, options_for=to_queue_named_in_args
        )

    with pytest.raises(redis.ResponseError, match="WRONGTYPE queue:broken is a string"):
        run_async(whole())
    assert set(r.keys("*")) == {b"queue:broken"}

    async def batched() -> list[str]:
        return await client.aio.push_bulk(
            "app.Bulk", args_list, options_for=to_queue_named_in_args, batch_size=4
        )

    with pytest.raises(BulkPushError) as caught:
        run_async(batched())
    assert caught.value.written == 4
    assert queue_jids(r, "fine") == caught.value.jids and len(caught.value.jids) == 4
