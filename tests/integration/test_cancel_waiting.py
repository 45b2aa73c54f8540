"""Cancellation of jobs that wait where the API cannot take them from, with real worker
processes: fetched ahead behind a long job, behind a fetch cap or an ordering key, in the
scheduled set, and a batched one (its batch's death and complete callbacks fire); and the
answers of explain and a second cancel right after a running job ended cancelled."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import redis
from click.testing import CliRunner

import rfetch
from rfetch.api import Api
from rfetch.cli import main
from rfetch.push.client import DEFAULT
from tests.support.redis_server import RedisServer
from tests.support.swarm import Records
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, JOBS_DIR, WorkerProcess

HELD_ENV = {**FAST_ENV, "RFETCH_PREFETCH_HORIZON": "60", "RFETCH_PREFETCH": "4"}
"""A -c 1 worker that fetches ahead of a long job and keeps what it fetched (the horizon
is longer than any job here), so a job waits in its private list behind the long one."""


def _module(name: str, url: str) -> ModuleType:
    """The workers' job module, imported under their name, the default client on ``url``."""
    sys.path.insert(0, str(JOBS_DIR))
    try:
        module = importlib.import_module(name)
    finally:
        sys.path.remove(str(JOBS_DIR))
    rfetch.configure(redis_url=url)
    return module


@pytest.fixture
def lj(redis_server: RedisServer, r: redis.Redis) -> Iterator[ModuleType]:
    yield _module("limit_jobs", redis_server.url)
    DEFAULT.set(None)


@pytest.fixture
def api(config: rfetch.Config) -> Api:
    return Api(config)


@pytest.fixture
def records(tmp_path: Path) -> Records:
    return Records(tmp_path / "records")


def _worker(url: str, tmp_path: Path, records: Records, args: list[str],
            env: dict[str, str] | None = None) -> WorkerProcess:
    return WorkerProcess(url, ["-r", "limit_jobs", *args],
                         env={**(env or FAST_ENV), "RFETCH_TEST_RECORD": str(records.path)},
                         log_dir=tmp_path)


def _runs_after(records: Records, lj: ModuleType, worker: WorkerProcess, **opts: object) -> None:
    """Push one more job (with ``opts``) and wait until it is done: whatever waited before
    it has had its turn."""
    jid = lj.Work.set(**opts).perform_async(0.0)
    wait_for(lambda: records.count("done")[jid] == 1, 20, worker.log)


def test_a_job_fetched_behind_a_long_job_never_runs(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    records: Records, lj: ModuleType,
) -> None:
    long = lj.Polite.perform_async(60.0)  # runs until cancelled
    short = lj.Work.perform_async(0.0)  # both taken by the worker's first fetch
    worker = _worker(redis_server.url, tmp_path, records, ["-c", "1"], HELD_ENV)
    try:
        wait_for(lambda: records.count("start")[long] == 1, 20, worker.log)
        wait_for(lambda: api.explain(short).state == "held", 20, worker.log)
        result = api.cancel(short, dead=True, reason="not wanted")
        lines = api.explain(short).lines()
        assert api.cancel(long).state == "cancelling"
        wait_for(lambda: records.count("stopped")[long] == 1, 20, worker.log)
        _runs_after(records, lj, worker)
        assert records.count("start")[short] == 0
        assert api.explain(short).state == "dead"
        assert sorted((row[0], row[3]) for row in records.rows("died")) == sorted(
            [(short, "rfetch.JobCancelled"), (long, "rfetch.JobCancelled")]
        )
        wait_for(lambda: "cancelled before it started" in worker.log(), 10, "the cancel's log line")
        assert result.state == "cancelling" and "will not start" in result.text, result.text
        assert f"jid {short}: cancel requested (not wanted): it will not start" in "\n".join(
            lines
        ), lines
    finally:
        assert worker.stop(20) == 0


def test_a_job_waiting_for_a_cap_slot_never_runs_and_the_slot_is_free_after(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    records: Records, lj: ModuleType,
) -> None:
    capped = lj.Work.set(concurrency_key="k", concurrency_limit=1)
    first = capped.perform_async(2.0)  # before the start: the queue is known to be capped
    worker = _worker(redis_server.url, tmp_path, records, ["-c", "2"])
    try:
        wait_for(lambda: records.count("start")[first] == 1, 20, worker.log)
        second = capped.perform_async(0.0)
        wait_for(lambda: api.explain(second).state == "waiting_cap", 20, worker.log)
        result = api.cancel(second)
        wait_for(lambda: records.count("done")[first] == 1, 20, worker.log)
        _runs_after(records, lj, worker, concurrency_key="k", concurrency_limit=1)
        assert records.count("start")[second] == 0
        assert api.explain(second).state == "not_found"
        wait_for(lambda: not r.hget("rfetch:cap-held:default", "k"), 20, worker.log)
        assert not r.hlen("rfetch:cap-slots:default")
        assert result.state == "marked" and "will not run" in result.text, result.text
    finally:
        assert worker.stop(20) == 0


def test_a_job_behind_its_ordering_key_never_runs_and_the_next_one_does(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    records: Records, lj: ModuleType,
) -> None:
    worker = _worker(redis_server.url, tmp_path, records, ["-c", "2"])
    keyed = lj.Work.set(key="o")
    try:
        worker.identity(r)
        first = keyed.perform_async(2.0)
        wait_for(lambda: records.count("start")[first] == 1, 20, worker.log)
        second = keyed.perform_async(0.0)
        third = keyed.perform_async(0.0)
        wait_for(lambda: api.explain(second).state == "waiting_key", 20, worker.log)
        result = api.cancel(second)
        wait_for(lambda: records.count("done")[third] == 1, 20, worker.log)
        assert records.count("start")[second] == 0
        wait_for(lambda: not r.hlen("rfetch:key-holders:default"), 20, worker.log)
        assert result.state == "marked" and "will not run" in result.text, result.text
    finally:
        assert worker.stop(20) == 0


def test_a_worker_started_after_the_cancel_does_not_run_the_job_either(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    records: Records, lj: ModuleType,
) -> None:
    keyed = lj.Work.set(key="late")
    first = keyed.perform_async(0.2)
    second = keyed.perform_async(0.0)
    third = keyed.perform_async(0.0)
    assert api.cancel(second).state == "marked"  # no worker heard the announcement
    worker = _worker(redis_server.url, tmp_path, records, ["-c", "2"])
    try:
        wait_for(lambda: records.count("done")[third] == 1, 20, worker.log)
        assert records.count("start")[second] == 0
        assert records.count("done")[first] == 1
    finally:
        assert worker.stop(20) == 0


def test_a_scheduled_job_never_runs(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    records: Records, lj: ModuleType,
) -> None:
    worker = _worker(redis_server.url, tmp_path, records, ["-c", "2"])
    try:
        worker.identity(r)
        jid = lj.Work.perform_in(1.0, 0.0)
        after = lj.Work.perform_in(1.5, 0.0)
        assert api.cancel(jid).state == "deleted"
        wait_for(lambda: records.count("done")[after] == 1, 20, worker.log)
        assert records.count("start")[jid] == 0
    finally:
        assert worker.stop(20) == 0


def test_explain_and_a_second_cancel_tell_the_truth_as_soon_as_it_ended(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    records: Records, lj: ModuleType,
) -> None:
    # A heartbeat every 5 s: its busy threads name the job long after it ended.
    env = {**FAST_ENV, "RFETCH_HEARTBEAT_INTERVAL": "5", "RFETCH_HEARTBEAT_TTL": "20"}
    worker = _worker(redis_server.url, tmp_path, records, ["-c", "2"], env)
    try:
        worker.identity(r)
        jid = lj.Polite.perform_async(60.0)
        wait_for(lambda: api.explain(jid).state == "running", 20, worker.log)
        assert api.cancel(jid).state == "cancelling"
        wait_for(lambda: records.count("died")[jid] == 1, 20, worker.log)
        explained = api.explain(jid)
        assert explained.state == "not_found", explained.lines()
        again = api.cancel(jid)
        assert again.state == "not_found" and not again.cancelled, again.text
        cli = CliRunner().invoke(main, ["cancel", jid, "--redis-url", redis_server.url])
        assert cli.exit_code == 1 and "not found" in cli.output, cli.output
    finally:
        assert worker.stop(20) == 0


def test_a_batched_job_cancelled_while_fetched_fires_the_batch_callbacks(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
) -> None:
    (tmp_path / "ev").mkdir()
    bj = _module("batch_jobs", redis_server.url)
    long = bj.Item.perform_async(0, False, 3000)
    batch = rfetch.Batch(on_death=bj.OnDeath, on_complete=bj.OnComplete)
    with batch.jobs():  # taken with the long job by the worker's first fetch
        jid = bj.Item.perform_async(1)
    worker = WorkerProcess(redis_server.url, ["-r", "batch_jobs", "-c", "1"],
                           env={**HELD_ENV, "RFETCH_BATCH_DIR": str(tmp_path / "ev")},
                           log_dir=tmp_path)

    def evidence() -> list[list[str]]:
        return [line.split("\t") for path in sorted((tmp_path / "ev").glob("*.log"))
                for line in path.read_text().splitlines()]

    try:
        wait_for(lambda: ["run", long] in [w[:2] for w in evidence()], 20, worker.log)
        wait_for(lambda: api.explain(jid).state == "held", 20, worker.log)
        assert api.cancel(jid).state == "cancelling"
        events = {"death", "complete"}
        wait_for(lambda: {w[1] for w in evidence() if w[:1] == ["callback"]
                          and w[2] == batch.bid} == events, 20, worker.log)
        assert ["run", jid] not in [w[:2] for w in evidence()]
    finally:
        DEFAULT.set(None)
        assert worker.stop(20) == 0


def test_a_batched_job_cancelled_in_its_queue_or_scheduled_fires_the_batch_callbacks(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
) -> None:
    (tmp_path / "ev").mkdir()
    bj = _module("batch_jobs", redis_server.url)
    batch = rfetch.Batch(on_death=bj.OnDeath, on_complete=bj.OnComplete)
    with batch.jobs():
        queued = bj.Item.perform_async(1)
        scheduled = bj.Item.set(queue="default").perform_in(3600, 2)
    try:
        assert api.cancel(queued).state == "deleted"
        assert api.cancel(scheduled, dead=True).state == "deleted"
        assert r.hget(f"b-{batch.bid}", "pending") == b"2"
        died = r.smembers(f"b-{batch.bid}-died") - {b""}
        assert died == {queued.encode(), scheduled.encode()}
        # Both callbacks are pushed to their queue, run by a worker.
        callbacks = [json.loads(raw)["class"] for raw in r.lrange("queue:default", 0, -1)]
        assert sorted(callbacks) == ["batch_jobs.OnComplete", "batch_jobs.OnDeath"]
    finally:
        DEFAULT.set(None)


def test_a_cancelled_job_retried_from_the_dead_set_runs(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    records: Records, lj: ModuleType,
) -> None:
    """"Retry now" on a job that a cancel sent to the dead set means "run it": the spent
    cancel mark (kept 24 h) must not cancel it a second time."""
    keyed = lj.Work.set(key="again")
    keyed.perform_async(0.2)
    second = keyed.perform_async(0.0)
    assert api.cancel(second, dead=True).state == "marked"
    worker = _worker(redis_server.url, tmp_path, records, ["-c", "2"])
    try:
        wait_for(lambda: api.explain(second).state == "dead", 20, worker.log)
        assert records.count("start")[second] == 0
        assert api.dead.retry([second]).missing == []
        wait_for(lambda: records.count("done")[second] == 1, 20, worker.log)
        assert r.zscore("rfetch:cancels", second) is None
    finally:
        assert worker.stop(20) == 0
