"""Sharding (``Config.shards``): two Redis servers, queues on both, one worker process
draining both (one launcher per shard), the admin API and CLI merging both, and a shard
going down stopping only its own queues."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import rfetch
from rfetch.api.shards import ShardedApi
from rfetch.cli import main
from rfetch.config import Config
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess


@pytest.fixture
def shards() -> Iterator[tuple[RedisServer, RedisServer]]:
    first, second = RedisServer(appendonly=True), RedisServer(appendonly=True)
    first.start()
    second.start()
    yield first, second
    first.cleanup()
    second.cleanup()


def runs(evidence: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for path in evidence.glob("*.log"):
        counts.update(line.split()[1] for line in path.read_text().splitlines() if line)
    return counts


def test_one_worker_drains_two_shards_and_the_api_merges_them(
    shards: tuple[RedisServer, RedisServer], tmp_path: Path
) -> None:
    first, second = shards
    urls = (first.url, second.url)
    config = Config(shards=urls, shard_map={"alpha": 0, "beta": 1}, network_timeout=1.0,
                    block_timeout=0.5)
    client = rfetch.Client(config)
    alpha = client.push_bulk("chaos_jobs.Tick", [[i] for i in range(100)], {"queue": "alpha"})
    beta = client.push_bulk("chaos_jobs.Tick", [[i] for i in range(60)], {"queue": "beta"})
    # Each queue is on its own shard only.
    assert first.client().llen("queue:alpha") == 100
    assert not first.client().exists("queue:beta")
    assert second.client().llen("queue:beta") == 60
    api = ShardedApi(config)
    assert [(q.name, q.shard, q.size) for q in api.queues()] == [
        ("alpha", "0", 100), ("beta", "1", 60),
    ]
    assert api.stats().enqueued == 160
    assert [name for name, _ in api.locate(beta[0])] == ["1"]

    evidence = tmp_path / "evidence"
    evidence.mkdir()
    env = {**FAST_ENV, "RFETCH_SHARDS": " ".join(urls), "RFETCH_SHARD_MAP": "alpha=0,beta=1",
           "RFETCH_CHAOS_DIR": str(evidence), "RFETCH_NETWORK_TIMEOUT": "1"}
    worker = WorkerProcess(first.url, ["-r", "chaos_jobs", "-q", "alpha", "-q", "beta"],
                           env=env, log_dir=tmp_path)
    try:
        wait_for(lambda: set(runs(evidence)) >= set(alpha + beta), 60,
                 lambda: worker.log()[-3000:])
        wait_for(lambda: api.stats().processed == 160, 10, "the counters of both shards")
        assert max(runs(evidence).values()) == 1  # every job once
        parts = [api.shard(i).stats() for i in (0, 1)]
        assert [p.processed for p in parts] == [100, 60]
        assert api.stats().processes == 2  # one heartbeat per shard
        result = CliRunner().invoke(main, ["stats", "--json"], env={
            "RFETCH_SHARDS": " ".join(urls), "RFETCH_SHARD_MAP": "alpha=0,beta=1"})
        assert result.exit_code == 0, result.output
        assert '"processed": 160' in result.output

        # The second shard goes down: only its queue stops; the first goes on.
        second.stop()
        more_alpha = client.push_bulk("chaos_jobs.Tick", [[i] for i in range(30)],
                                      {"queue": "alpha"})
        more_beta = client.push_bulk("chaos_jobs.Tick", [[i] for i in range(10)],
                                     {"queue": "beta"})
        assert client.pending() == 10  # buffered for the shard that is down
        wait_for(lambda: set(runs(evidence)) >= set(more_alpha), 30, "the first shard's jobs")
        assert not set(runs(evidence)) & set(more_beta)
        assert worker.proc.poll() is None
        second.start()
        assert client.flush(30) == 0
        wait_for(lambda: set(runs(evidence)) >= set(more_beta), 60,
                 lambda: worker.log()[-3000:])
        assert max(runs(evidence).values()) == 1
    finally:
        assert worker.stop(20) == 0, worker.log()[-3000:]
        api.close()


def test_a_one_redis_view_refuses_shards_instead_of_reading_redis_url(
    shards: tuple[RedisServer, RedisServer],
) -> None:
    urls = " ".join(server.url for server in shards)
    result = CliRunner().invoke(main, ["retries", "list"], env={"RFETCH_SHARDS": urls})
    assert result.exit_code == 1
    assert "ShardedApi" in result.output
    result = CliRunner().invoke(main, ["queues"], env={"RFETCH_SHARDS": urls})
    assert result.exit_code == 0, result.output


def test_explain_says_which_shard_holds_a_job(shards: tuple[RedisServer, RedisServer]) -> None:
    urls = tuple(server.url for server in shards)
    client = rfetch.Client(Config(shards=urls, shard_map={"beta": 1}))
    jid = client.push("Some", [1], {"queue": "beta"})
    env = {"RFETCH_SHARDS": " ".join(urls), "RFETCH_SHARD_MAP": "beta=1"}
    result = CliRunner().invoke(main, ["explain", str(jid)], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("shard 1:")
    result = CliRunner().invoke(main, ["explain", "0" * 24], env=env)
    assert result.exit_code == 1
    assert "not found on any shard" in result.output
