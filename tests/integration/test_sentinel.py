"""Redis Sentinel: clients, workers and the CLI reach the master through the sentinels,
follow a failover without a restart, and fail at start on a wrong setting (no hang)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from redis.sentinel import Sentinel

import rfetch
from rfetch.cli import main
from rfetch.config import Config
from rfetch.errors import ConfigError, RedisUnavailable
from tests.support.aio import run_async
from tests.support.redis_server import RedisServer, free_port
from tests.support.sentinel import MASTER_NAME, SentinelSet
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess


@pytest.fixture(scope="module")
def sentinels() -> Iterator[SentinelSet]:
    cluster = SentinelSet()
    cluster.start()
    yield cluster
    cluster.cleanup()


def master_client(cluster: SentinelSet) -> redis.Redis:
    hosts = [("127.0.0.1", s.port) for s in cluster.sentinels]
    return Sentinel(hosts, socket_timeout=2).master_for(MASTER_NAME, socket_timeout=2)  # type: ignore[no-untyped-call,no-any-return]


def test_no_reachable_sentinel_is_an_error_at_start() -> None:
    url = f"redis+sentinel://127.0.0.1:{free_port()},127.0.0.1:{free_port()}/{MASTER_NAME}/0"
    started = time.monotonic()
    with pytest.raises(RedisUnavailable, match="no sentinel reachable"):
        rfetch.Client(Config(redis_url=url, network_timeout=1.0, block_timeout=0.5))
    assert time.monotonic() - started < 60  # refused at once, not retried without end


def test_unknown_master_is_an_error_at_start(sentinels: SentinelSet) -> None:
    url = sentinels.url.replace(MASTER_NAME, "nosuchmaster")
    with pytest.raises(ConfigError, match="know no master named 'nosuchmaster'"):
        rfetch.Client(Config(redis_url=url))


def test_cli_and_worker_refuse_a_wrong_setting(sentinels: SentinelSet, tmp_path: Path) -> None:
    unknown = sentinels.url.replace(MASTER_NAME, "nosuchmaster")
    result = CliRunner().invoke(main, ["stats", "--redis-url", unknown])
    assert result.exit_code == 1
    assert "know no master named 'nosuchmaster'" in result.output
    result = CliRunner().invoke(main, ["stats", "--redis-url", "redis+sentinel://h:1"])
    assert result.exit_code == 1
    assert "names the master after the hosts" in result.output
    nobody = f"redis+sentinel://127.0.0.1:{free_port()}/{MASTER_NAME}"
    worker = WorkerProcess(nobody, ["-r", "chaos_jobs"], log_dir=tmp_path)
    assert worker.wait(30) == 1
    assert "no sentinel reachable" in worker.log()


def fresh_start(sentinels: SentinelSet, tmp_path: Path) -> tuple[Path, redis.Redis, rfetch.Client]:
    """An empty evidence directory, the master (flushed) and a client through the sentinels."""
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    admin = master_client(sentinels)
    admin.flushall()
    client = rfetch.Client(Config(redis_url=sentinels.url, network_timeout=1.0,
                                  block_timeout=0.5))
    return evidence, admin, client


def test_push_and_work_through_a_failover(sentinels: SentinelSet, tmp_path: Path) -> None:
    evidence, admin, client = fresh_start(sentinels, tmp_path)
    worker = WorkerProcess(
        sentinels.url, ["-r", "chaos_jobs", "-c", "2"],
        env={**FAST_ENV, "RFETCH_NETWORK_TIMEOUT": "1", "RFETCH_CHAOS_DIR": str(evidence)},
        log_dir=tmp_path,
    )
    try:
        worker.identity(admin)
        before = client.push_bulk("chaos_jobs.Tick", [[i] for i in range(20)])
        wait_for(lambda: done(evidence) >= set(before), 20, "the jobs pushed before")
        killed, _ = sentinels.kill_master()
        # The same client and the same worker process go on against the new master.
        after = client.push_bulk("chaos_jobs.Tick", [[i] for i in range(20)])
        client.flush(30)
        assert client.pending() == 0
        wait_for(lambda: done(evidence) >= set(after), 30, "the jobs pushed after the failover")
        assert worker.proc.poll() is None
        sentinels.restart_as_replica(killed)
    finally:
        worker.stop(20)


def test_an_idle_worker_of_three_queues_is_woken_after_a_failover(
    sentinels: SentinelSet, tmp_path: Path
) -> None:
    """After the master is killed, the worker's wake-up subscription is made again on the
    new master: a job pushed to its third queue starts long before its 30 s BLMOVE on the
    first ends."""
    evidence, admin, client = fresh_start(sentinels, tmp_path)
    worker = WorkerProcess(
        sentinels.url, ["-r", "chaos_jobs", "-c", "2", "-q", "a", "-q", "b", "-q", "c"],
        env={**FAST_ENV, "RFETCH_BLOCK_TIMEOUT": "30", "RFETCH_NETWORK_TIMEOUT": "40",
             "RFETCH_CHAOS_DIR": str(evidence)},
        log_dir=tmp_path,
    )
    try:
        worker.identity(admin)
        killed, _ = sentinels.kill_master()
        first = client.push("chaos_jobs.Tick", [0], {"queue": "a"})
        client.flush(30)
        wait_for(lambda: first in done(evidence), 60, "the job on a, after the failover")
        time.sleep(1)  # the worker blocks again on a
        third = client.push("chaos_jobs.Tick", [1], {"queue": "c"})
        wait_for(lambda: third in done(evidence), 20, lambda: worker.log()[-3000:])
        assert worker.proc.poll() is None
        sentinels.restart_as_replica(killed)
    finally:
        worker.stop(30)


def queued_jids(r: redis.Redis) -> set[str]:
    return {json.loads(raw)["jid"] for raw in r.lrange("queue:default", 0, -1)}


def test_async_pushes_go_to_the_master_and_follow_a_failover(sentinels: SentinelSet) -> None:
    """``aperform_async`` through a ``redis+sentinel://`` URL, all in one event loop (one
    asyncio Sentinel client): written to the master, and to the new master after a
    failover (pushes that meet the dead master are buffered and delivered by the sync
    client's delivery thread; later ones go through the asyncio client again)."""
    admin = master_client(sentinels)
    admin.flushall()
    client = rfetch.Client(Config(redis_url=sentinels.url, network_timeout=1.0,
                                  block_timeout=0.5))
    killed: list[RedisServer] = []

    async def push_some(first: int) -> list[str | None]:
        jids = [await client.aio.push("chaos_jobs.Tick", [i]) for i in range(first, first + 3)]
        jids += await client.aio.push_bulk("chaos_jobs.Tick", [[first + 3], [first + 4]])
        return jids

    async def scenario() -> tuple[list[str | None], list[str | None]]:
        before = await push_some(0)
        assert queued_jids(admin) == set(before)
        server, _ = await asyncio.to_thread(sentinels.kill_master)
        killed.append(server)
        during = await push_some(10)
        assert await asyncio.to_thread(client.flush, 30) == 0
        after = await push_some(20)
        assert client.pending() == 0  # written by the asyncio client, nothing buffered
        return during, after

    try:
        during, after = run_async(scenario())
        new_master = master_client(sentinels)
        assert queued_jids(new_master) >= set(during) | set(after)
    finally:
        for server in killed:
            sentinels.restart_as_replica(server)


def done(evidence: Path) -> set[str]:
    jids: set[str] = set()
    for path in evidence.glob("*.log"):
        jids.update(line.split()[1] for line in path.read_text().splitlines() if line)
    return jids
