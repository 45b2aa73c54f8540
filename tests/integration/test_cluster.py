"""Cluster mode on a real Redis Cluster (3 masters + 3 replicas, started by the tests): with
a hash-tag namespace every script and every MULTI/EXEC (the client's delivery, the
heartbeat) runs on one slot, a worker drains plain, ordered, tenant, capped, unique and
scheduled jobs, the admin API reads it all, and a ``CLUSTER FAILOVER`` of the namespace's master is
followed without a restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import rfetch
from rfetch.api import Api
from rfetch.config import Config
from rfetch.errors import ConfigError
from tests.support.aio import run_async
from tests.support.cluster import ClusterSet
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess

NAMESPACE = "{rfetch}"


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterSet]:
    nodes = ClusterSet()
    nodes.start()
    yield nodes
    nodes.cleanup()


def cluster_config(cluster: ClusterSet) -> Config:
    return Config(redis_url=cluster.url, cluster=True, namespace=NAMESPACE,
                  network_timeout=2.0, block_timeout=0.5)


def done(evidence: Path) -> set[str]:
    jids: set[str] = set()
    for path in evidence.glob("*.log"):
        jids.update(line.split()[1] for line in path.read_text().splitlines() if line)
    return jids


def test_cluster_mode_needs_a_hash_tag_namespace() -> None:
    for namespace in (None, "myapp", "{}", "{a}{b}", "x{a}"):
        with pytest.raises(ConfigError, match="hash tag"):
            Config(cluster=True, namespace=namespace)
    assert Config(cluster=True, namespace="{myapp}").cluster


def test_every_script_runs_on_one_slot(cluster: ClusterSet, tmp_path: Path) -> None:
    config = cluster_config(cluster)
    client = rfetch.Client(config)
    jids: list[str | None] = []
    jids += client.push_bulk("chaos_jobs.Tick", [[i] for i in range(50)])
    jids += [client.push("chaos_jobs.Tick", [i], {"key": f"order-{i % 2}"}) for i in range(6)]
    jids += [client.push("chaos_jobs.Tick", [i], {"tenant": f"t{i % 3}"}) for i in range(6)]
    capped = {"concurrency_key": "c", "concurrency_limit": 2}  # fetch caps
    jids += [client.push("chaos_jobs.Tick", [i], capped) for i in range(6)]
    jids.append(client.push("chaos_jobs.Tick", ["later"], capped, at=time.time() + 1))
    unique = client.push("chaos_jobs.Tick", ["once"], {"unique_for": 60})
    assert client.push("chaos_jobs.Tick", ["once"], {"unique_for": 60}) is None
    jids.append(unique)
    jids += [client.push("chaos_jobs.Tick", [i], at=time.time() + 1) for i in range(3)]
    assert client.pending() == 0
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    worker = WorkerProcess(
        cluster.url, ["-r", "chaos_jobs", "-c", "3"],
        env={**FAST_ENV, "RFETCH_CLUSTER": "1", "RFETCH_NAMESPACE": NAMESPACE,
             "RFETCH_CHAOS_DIR": str(evidence)},
        log_dir=tmp_path,
    )
    try:
        wait_for(lambda: done(evidence) >= set(jids), 60, lambda: worker.log()[-3000:])
        api = Api(config)
        wait_for(lambda: len(api.processes.all()) == 1, 10, "the heartbeat")
        wait_for(lambda: api.stats().processed == len(jids), 10, "the counters")
        assert api.stats().enqueued == 0
        assert api.concurrency_keys() == []  # every slot given back
    finally:
        assert worker.stop(20) == 0, worker.log()[-3000:]
    # Every key of the namespace is on the one master of its slot.
    master = cluster.node_of(f"{NAMESPACE}:queues").client()
    assert all(key.startswith(NAMESPACE.encode()) for key in master.keys("*"))


def test_async_pushes_on_a_cluster(cluster: ClusterSet, tmp_path: Path) -> None:
    """``aperform_async`` with cluster mode: plain, bulk, scheduled and gated (ordering key,
    tenant) pushes through the asyncio RedisCluster land in the namespace's slot, and a
    worker runs them."""
    config = cluster_config(cluster)
    client = rfetch.Client(config)
    evidence = tmp_path / "evidence"
    evidence.mkdir()

    async def push_all() -> list[str | None]:
        jids = [await client.aio.push("chaos_jobs.Tick", [i]) for i in range(3)]
        jids += await client.aio.push_bulk("chaos_jobs.Tick", [[i] for i in range(3, 13)])
        jids += [await client.aio.push("chaos_jobs.Tick", [i], {"key": f"k{i % 2}"})
                 for i in range(13, 17)]
        jids += [await client.aio.push("chaos_jobs.Tick", [i], {"tenant": "t"})
                 for i in range(17, 19)]
        jids.append(await client.aio.push("chaos_jobs.Tick", [19], at=time.time() + 1))
        return jids

    jids = run_async(push_all())
    assert len(set(jids)) == 20 and None not in jids
    assert client.pending() == 0
    worker = WorkerProcess(
        cluster.url, ["-r", "chaos_jobs", "-c", "2"],
        env={**FAST_ENV, "RFETCH_CLUSTER": "1", "RFETCH_NAMESPACE": NAMESPACE,
             "RFETCH_CHAOS_DIR": str(evidence), "RFETCH_NETWORK_TIMEOUT": "2"},
        log_dir=tmp_path,
    )
    try:
        wait_for(lambda: done(evidence) >= set(jids), 30, lambda: worker.log()[-3000:])
    finally:
        assert worker.stop(20) == 0, worker.log()[-3000:]


def test_admin_api_on_a_cluster(cluster: ClusterSet) -> None:
    config = cluster_config(cluster)
    client = rfetch.Client(config)
    jid = client.push("Some", [1], {"queue": "admin"})
    keyed = client.push("Some", [2], {"queue": "admin", "key": "k"})
    later = client.push("Some", [3], {"queue": "admin"}, at=time.time() + 3600)
    api = Api(config)
    assert api.redis_info().mode == "cluster"
    assert {q.name: q.size for q in api.queues()}["admin"] == 2
    queue = api.queue("admin")
    assert queue.pause()
    assert queue.is_paused()
    assert queue.unpause()
    assert api.explain(str(jid)).summary
    assert not api.explain("0" * 24).found  # the SCAN of unknown private lists, on one node
    assert api.ordering_key_count("admin") >= 1
    scheduled = api.job_set("schedule")
    assert [record.jid for record in scheduled.page(limit=10).jobs] == [later]
    assert scheduled.delete([str(later)]).done == 1
    assert queue.clear() >= 2
    assert keyed is not None


def test_worker_and_client_follow_a_cluster_failover(cluster: ClusterSet, tmp_path: Path) -> None:
    config = cluster_config(cluster)
    client = rfetch.Client(config)
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    worker = WorkerProcess(
        cluster.url, ["-r", "chaos_jobs", "-c", "2"],
        env={**FAST_ENV, "RFETCH_CLUSTER": "1", "RFETCH_NAMESPACE": NAMESPACE,
             "RFETCH_CHAOS_DIR": str(evidence), "RFETCH_NETWORK_TIMEOUT": "2"},
        log_dir=tmp_path,
    )
    try:
        before = client.push_bulk("chaos_jobs.Tick", [[i] for i in range(20)])
        wait_for(lambda: done(evidence) >= set(before), 30, "the jobs pushed before")
        cluster.failover(f"{NAMESPACE}:queues")
        after = client.push_bulk("chaos_jobs.Tick", [[i] for i in range(20)])
        assert client.flush(30) == 0
        wait_for(lambda: done(evidence) >= set(after), 30, lambda: worker.log()[-3000:])
        assert worker.proc.poll() is None
    finally:
        assert worker.stop(20) == 0, worker.log()[-3000:]


def test_an_idle_worker_of_three_queues_is_woken_on_a_cluster(
    cluster: ClusterSet, tmp_path: Path
) -> None:
    """A job pushed to the third queue starts long before the 60 s BLMOVE on the first
    ends: the push script's PUBLISH reaches the worker's subscription on the cluster."""
    client = rfetch.Client(cluster_config(cluster))
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    worker = WorkerProcess(
        cluster.url, ["-r", "chaos_jobs", "-c", "2", "-q", "a", "-q", "b", "-q", "c"],
        env={**FAST_ENV, "RFETCH_CLUSTER": "1", "RFETCH_NAMESPACE": NAMESPACE,
             "RFETCH_CHAOS_DIR": str(evidence), "RFETCH_BLOCK_TIMEOUT": "60",
             "RFETCH_NETWORK_TIMEOUT": "70"},
        log_dir=tmp_path,
    )
    try:
        first = client.push("chaos_jobs.Tick", [0], {"queue": "a"})
        wait_for(lambda: first in done(evidence), 60, lambda: worker.log()[-3000:])
        time.sleep(1)  # the worker blocks again on a
        third = client.push("chaos_jobs.Tick", [1], {"queue": "c"})
        wait_for(lambda: third in done(evidence), 20, lambda: worker.log()[-3000:])
    finally:
        assert worker.stop(30) == 0, worker.log()[-3000:]


def test_web_ui_pages_on_a_cluster(cluster: ClusterSet) -> None:
    from werkzeug.test import Client as WebClient

    from rfetch.web import create_app
    from rfetch.web.router import ROUTES

    config = cluster_config(cluster)
    rfetch.Client(config).push("Some", [1], {"queue": "web", "key": "k"})
    web = WebClient(create_app(config, basic_auth=False))
    pages = [rule for rule, _, method, _ in ROUTES if method == "GET" and "<" not in rule]
    pages += ["/queues/web", "/explain?jid=" + "0" * 24]
    assert {page: web.get(page).status_code for page in pages} == dict.fromkeys(pages, 200)


def test_a_batch_on_a_cluster(cluster: ClusterSet, tmp_path: Path) -> None:
    import importlib
    import json
    import sys

    from werkzeug.test import Client as WebClient

    from rfetch.web import create_app
    from tests.support.workers import JOBS_DIR

    sys.path.insert(0, str(JOBS_DIR))
    try:
        batch_jobs = importlib.import_module("batch_jobs")
    finally:
        sys.path.remove(str(JOBS_DIR))
    config = cluster_config(cluster)
    client = rfetch.Client(config)
    batch = rfetch.Batch(on_success=(batch_jobs.OnSuccess, {"on": "cluster"}), client=client)
    with batch.jobs():
        client.push_bulk("batch_jobs.Item", [[i, i == 0] for i in range(10)])
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    worker = WorkerProcess(
        cluster.url, ["-r", "batch_jobs", "-c", "3"],
        env={**FAST_ENV, "RFETCH_CLUSTER": "1", "RFETCH_NAMESPACE": NAMESPACE,
             "RFETCH_BATCH_DIR": str(evidence)},
        log_dir=tmp_path,
    )

    def successes() -> list[list[str]]:
        lines = [line.split("\t") for path in evidence.glob("*.log")
                 for line in path.read_text().splitlines()]
        return [w for w in lines if w[:3] == ["callback", "success", batch.bid]]

    try:
        wait_for(lambda: successes(), 60, lambda: worker.log()[-3000:])
    finally:
        assert worker.stop(20) == 0, worker.log()[-3000:]
    [line] = successes()
    assert json.loads(line[3])["total"] == 10 and json.loads(line[4]) == {"on": "cluster"}
    status = rfetch.BatchStatus(batch.bid, client=client)
    assert status.succeeded and status.pending == 0
    web = WebClient(create_app(config, basic_auth=False))
    assert web.get("/batches").status_code == 200
    assert web.get(f"/batches/{batch.bid}").status_code == 200


def test_limiters_on_a_cluster(cluster: ClusterSet) -> None:
    """Each limiter kind runs its script on the namespace's slot of a Redis Cluster, and the
    API lists them."""
    client = rfetch.Client(cluster_config(cluster))
    kinds = [
        rfetch.Limiter.window("c-window", 2, per=60, wait_timeout=0, client=client),
        rfetch.Limiter.bucket("c-bucket", 2, per=60, wait_timeout=0, client=client),
        rfetch.Limiter.leaky("c-leaky", 2, per=60, burst=2, wait_timeout=0, client=client),
        rfetch.Limiter.points("c-points", 2, per=60, wait_timeout=0, client=client),
        rfetch.Limiter.concurrent("c-conc", 2, lock_timeout=30, wait_timeout=0, client=client),
    ]
    for limiter in kinds:
        held = [limiter.acquire(), limiter.acquire()]
        with pytest.raises(rfetch.OverLimit), limiter.within_limit():
            pass
        for grant in held:
            limiter.release(grant)
    infos = {i.name: i for i in Api(cluster_config(cluster)).limiters()}
    assert set(infos) == {"c-window", "c-bucket", "c-leaky", "c-points", "c-conc"}
    assert all(i.overlimit == 1 and i.calls == 2 for i in infos.values())
    master = cluster.node_of(f"{NAMESPACE}:rfetch:limiters").client()
    assert master.exists(f"{NAMESPACE}:rfetch:limiter:c-conc")


def test_results_and_a_chain_on_a_cluster(cluster: ClusterSet, tmp_path: Path) -> None:
    """complete.lua and depend.lua (and the keys they derive from the namespace) run on the
    namespace's slot: a chain runs in order and its results are read back."""
    from tests.jobs.chaos_jobs import FailsTwice, Square

    config = cluster_config(cluster)
    client = rfetch.Client(config)
    jids = [Square.set(client=client).perform_async(n) for n in range(5)]
    chain = rfetch.chain(FailsTwice.s("a"), FailsTwice.s("b"), client=client)
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    worker = WorkerProcess(
        cluster.url, ["-r", "chaos_jobs", "-c", "3"],
        env={**FAST_ENV, "RFETCH_CLUSTER": "1", "RFETCH_NAMESPACE": NAMESPACE,
             "RFETCH_CHAOS_DIR": str(evidence)},
        log_dir=tmp_path,
    )
    try:
        assert [rfetch.result(j, 30, client) for j in jids if j] == [n * n for n in range(5)]
        assert rfetch.result(chain.jids[0], 30, client) == "a"
        wait_for(lambda: chain.last in done(evidence), 30, lambda: worker.log()[-3000:])
        assert Api(config).waiting_count() == 0
    finally:
        assert worker.stop(20) == 0, worker.log()[-3000:]
