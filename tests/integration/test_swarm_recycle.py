"""Recycling a swarm's worker runs no job twice: ``--max-memory`` and USR2 with jobs that
run longer than ``-t``, real workers, Redis and signals. A recycled worker lets its running
jobs finish (no ``-t`` deadline) and exits 0; each job's starts are counted by the job
itself (``INCR`` in Redis) and recorded in a file outside Redis. A job that keeps its
recycled worker until it is killed (the OOM killer) ends as a poison pill."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
import redis

import rfetch
from tests.support.redis_server import RedisServer
from tests.support.swarm import Records, children, set_entries
from tests.support.wait import wait_for
from tests.support.workers import JOBS_DIR, WorkerProcess

ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.5",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
    "RFETCH_POLL_INITIAL_WAIT": "600",
}


@pytest.fixture(autouse=True)
def _jobs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(JOBS_DIR))


def _swarm(url: str, tmp_path: Path, records: Records, *args: str) -> WorkerProcess:
    return WorkerProcess(
        url,
        ["-r", "limit_jobs", "--processes", "1", *args],
        env={**ENV, "RFETCH_TEST_RECORD": str(records.path)},
        log_dir=tmp_path,
    )


def _hog(url: str, mb: int, seconds: float) -> str:
    import limit_jobs

    client = rfetch.Client(rfetch.Config(redis_url=url))
    jid = limit_jobs.Hog.set(client=client).perform_async(mb, seconds)
    assert jid is not None
    return jid


def test_a_job_past_max_memory_runs_once_and_its_worker_is_recycled_after(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records")
    worker = _swarm(redis_server.url, tmp_path, records, "-c", "1", "--max-memory", "150",
                    "-t", "1")
    try:
        wait_for(lambda: r.scard("processes") == 1, 30, worker.log)
        jid = _hog(redis_server.url, 200, 4.0)  # 4 s at 200 MB: past -t and the limit
        wait_for(lambda: records.count("done")[jid] == 1, 60, worker.log)
        ran_in = records.pids("start", jid)
        # The worker that ran it is recycled once the job is done, and a fresh one runs.
        wait_for(lambda: ran_in[0] not in {c.pid for c in children(worker.pid)}, 30,
                 worker.log)
        wait_for(lambda: r.scard("processes") == 1, 30, worker.log)
        assert int(r.get(f"hog-starts:{jid}") or 0) == 1
        assert records.count("start")[jid] == 1
        log = worker.log()
        assert re.search(r"replacing worker 0 \(pid \d+\): max-memory", log), log
        assert "pushing them back" not in log
        assert r.zcard("dead") == 0 and r.llen("queue:default") == 0
    finally:
        assert worker.stop(30) == 0


def test_usr2_lets_running_jobs_finish_and_runs_none_twice(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records")
    worker = _swarm(redis_server.url, tmp_path, records, "-c", "2", "-t", "1")
    try:
        wait_for(lambda: r.scard("processes") == 1, 30, worker.log)
        old = {c.pid for c in children(worker.pid)}
        jids = [_hog(redis_server.url, 1, 5.0) for _ in range(2)]  # each 5 s, past -t
        wait_for(lambda: set(records.count("start")) == set(jids), 30, worker.log)
        worker.signal(signal.SIGUSR2)
        # The replacement is forked at once; the old worker exits after its jobs.
        wait_for(lambda: set(records.count("done")) == set(jids), 60, worker.log)
        wait_for(lambda: old.isdisjoint(c.pid for c in children(worker.pid)), 30,
                 worker.log)
        assert all(int(r.get(f"hog-starts:{jid}") or 0) == 1 for jid in jids)
        assert max(records.count("start").values()) == 1
        assert max(records.count("done").values()) == 1
        assert {pid for jid in jids for pid in records.pids("done", jid)} == old
        assert "pushing them back" not in worker.log()
    finally:
        assert worker.stop(30) == 0


@pytest.mark.slow
def test_term_during_a_recycle_pushes_back_after_t(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """A real stop (TERM to the parent) during a recycle is a deploy: ``-t``, then the
    recycled worker's unfinished job goes back to its queue, not lost."""
    records = Records(tmp_path / "records")
    worker = _swarm(redis_server.url, tmp_path, records, "-c", "1", "-t", "1")
    wait_for(lambda: r.scard("processes") == 1, 30, worker.log)
    jid = _hog(redis_server.url, 1, 120.0)
    wait_for(lambda: records.count("start")[jid] == 1, 30, worker.log)
    worker.signal(signal.SIGUSR2)
    wait_for(lambda: "recycling" in worker.log(), 30, worker.log)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert r.llen("queue:default") == 1 and not records.count("done")
    assert not list(r.scan_iter("queue:sq|*"))


@pytest.mark.slow
def test_a_job_whose_memory_kills_its_worker_ends_in_the_dead_set(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """A recycle sets no deadline, so a job that keeps its memory is ended by what ends its
    worker: here a KILL of each recycled worker, as the OOM killer would. The parent
    recovers it, counting recoveries: after ``poison_max_recoveries`` (3) it is in the dead
    set as a poison pill, not run again in every fresh worker."""
    records = Records(tmp_path / "records")
    worker = _swarm(redis_server.url, tmp_path, records, "-c", "1", "--max-memory", "150",
                    "-t", "1")
    try:
        wait_for(lambda: r.scard("processes") == 1, 30, worker.log)
        jid = _hog(redis_server.url, 200, 3600.0)
        for kills in range(1, 4):
            wait_for(lambda k=kills: records.count("start")[jid] == k, 60, worker.log)
            wait_for(lambda k=kills: worker.log().count("max-memory") >= k, 60, worker.log)
            time.sleep(2.0)  # past -t: the recycled worker still runs it, alone
            assert records.count("start")[jid] == kills
            os.kill(records.pids("start", jid)[-1], signal.SIGKILL)  # raises if it is gone
        wait_for(lambda: r.zcard("dead") == 1, 60, worker.log)
        dead = set_entries(r, "dead")[jid]
        assert dead["error_class"] == "rfetch.PoisonPill", dead
        assert "recovered 3 times" in str(dead["error_message"])
        assert r.llen("queue:default") == 0 and records.count("died")[jid] == 1
        assert int(r.get(f"hog-starts:{jid}") or 0) == 3
    finally:
        assert worker.stop(30) == 0


def test_usr1_to_a_sharded_worker_lets_each_shard_finish_its_jobs(tmp_path: Path) -> None:
    """USR1 (what a swarm's parent sends to recycle) to a worker over two shards: the idle
    shard's launcher exits at once, without stopping the other one, whose job (longer than
    ``-t``) finishes; the worker then exits 0 with nothing pushed back."""
    first, second = RedisServer(), RedisServer()
    first.start()
    second.start()
    records = Records(tmp_path / "records")
    env = {**ENV, "RFETCH_SHARDS": f"{first.url} {second.url}",
           "RFETCH_SHARD_MAP": "alpha=0,beta=1", "RFETCH_TEST_RECORD": str(records.path)}
    worker = WorkerProcess(first.url, ["-r", "limit_jobs", "-q", "alpha", "-q", "beta",
                                       "-t", "1"], env=env, log_dir=tmp_path)
    try:
        import limit_jobs

        config = rfetch.Config(shards=(first.url, second.url), shard_map={"alpha": 0, "beta": 1})
        jid = limit_jobs.Hog.set(client=rfetch.Client(config), queue="alpha").perform_async(
            1, 4.0)
        wait_for(lambda: records.count("start")[jid] == 1, 30, worker.log)
        worker.signal(signal.SIGUSR1)
        assert worker.wait(60) == 0, worker.log()
        assert records.count("done")[jid] == 1
        assert int(first.client().get(f"hog-starts:{jid}") or 0) == 1
        assert first.client().llen("queue:alpha") == 0
        assert "pushing them back" not in worker.log()
    finally:
        if worker.proc.poll() is None:
            worker.stop(20)
        first.cleanup()
        second.cleanup()
