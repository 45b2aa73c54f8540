"""``Config.min_replicas``: a push counts as done only once a replica has it (``WAIT``);
one that is not replicated in time stays in the reliable-push buffer, is dropped from it
once the replica catches up (no second copy), and is pushed again if the connection that
wrote it was lost (no job lost silently)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import rfetch
from rfetch.config import Config
from tests.support.aio import run_async
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for


@pytest.fixture
def pair() -> Iterator[tuple[RedisServer, RedisServer]]:
    master = RedisServer()
    master.start()
    replica = RedisServer(extra_args=("--replicaof", "127.0.0.1", str(master.port)))
    replica.start()
    wait_for(
        lambda: replica.client().info("replication").get("master_link_status") == "up",
        15, "the replica to sync",
    )
    yield master, replica
    replica.cleanup()
    master.cleanup()


def client_for(master: RedisServer, wait: float = 0.3) -> rfetch.Client:
    """A client whose pushes wait ``wait`` seconds (WAIT's bound) for the replica: the short
    default where the test freezes the replica, a longer one (still under the 2 s network
    timeout, so WAIT's connection survives it) where a push must be vouched for even when a
    loaded machine delays the replica's acknowledgement."""
    return rfetch.Client(Config(redis_url=master.url, network_timeout=2.0, block_timeout=0.5,
                                min_replicas=1, min_replicas_timeout=wait))


def queued_args(server: RedisServer) -> list[object]:
    return [json.loads(raw)["args"][0] for raw in reversed(server.client().lrange(
        "queue:default", 0, -1))]


def test_a_replicated_push_is_done_at_once(pair: tuple[RedisServer, RedisServer]) -> None:
    master, replica = pair
    client = client_for(master, wait=1.5)
    client.push("X", [1])
    client.push_bulk("X", [[2], [3]])
    assert client.pending() == 0
    # WAIT returned, so the replica has every job already.
    assert queued_args(replica) == [1, 2, 3]


def test_a_push_the_replica_lacks_stays_buffered_until_replicated(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    master, replica = pair
    client = client_for(master)
    replica.freeze()
    try:
        jid = client.push("X", [1])
        assert isinstance(jid, str)
        assert client.pending() == 1  # written to the master, not reported as done
        assert queued_args(master) == [1]
        client.push("X", [2])  # kept behind it, in order, not written yet
        assert client.pending() == 2
        assert client.flush(0.5) == 2
    finally:
        replica.thaw()
    assert client.flush(15) == 0
    # The first job was not pushed a second time: WAIT on the same connection settled it.
    assert queued_args(master) == [1, 2]
    wait_for(lambda: queued_args(replica) == [1, 2], 10, "the replica to have both jobs")


def test_an_unreplicated_push_lost_with_its_master_is_pushed_again(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    master, replica = pair
    client = client_for(master)
    replica.freeze()
    client.push("X", [1])
    assert client.pending() == 1
    # The master dies before the replica got the job, and comes back empty.
    master.kill()
    replica.thaw()
    master.start()
    assert queued_args(master) == []
    # The write's connection is gone, so WAIT cannot vouch for it: the job is pushed again.
    assert client.flush(15) == 0
    assert queued_args(master) == [1]


def test_an_async_push_waits_for_the_replica_too(pair: tuple[RedisServer, RedisServer]) -> None:
    """``aperform_async`` with ``min_replicas``: done at once when replicated; kept in the
    buffer, not reported as done, while the replica lacks it; settled by WAIT on the same
    connection without a second copy."""
    master, replica = pair
    client = client_for(master, wait=1.5)

    async def push_three() -> None:
        await client.aio.push("X", [1])
        await client.aio.push_bulk("X", [[2], [3]])

    run_async(push_three())
    assert client.pending() == 0
    assert queued_args(replica) == [1, 2, 3]  # WAIT returned: the replica has them
    replica.freeze()
    try:
        jid = run_async(client.aio.push("X", [4]))
        assert isinstance(jid, str)
        assert client.pending() == 1  # written to the master, not reported as done
        assert queued_args(master) == [1, 2, 3, 4]
    finally:
        replica.thaw()
    assert client.flush(15) == 0
    assert queued_args(master) == [1, 2, 3, 4]
    wait_for(lambda: queued_args(replica) == [1, 2, 3, 4], 10, "the replica to have job 4")
