"""Job time limits with real worker processes and signals: the hard path in a swarm (the
overrunning job in the retry set as ``rfetch.JobTimeout``, every other job its process held
run exactly once, a replacement child), the same without a supervisor (exit 75), and the
cooperative path (``check_cancelled`` raising ``JobTimeout``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

import rfetch
from rfetch.swarm.channel import EXIT_RETIRED
from tests.support.redis_server import RedisServer
from tests.support.swarm import Records, children, set_entries
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.5",
    "RFETCH_JOB_TIMEOUT_GRACE": "1",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
    "RFETCH_POLL_INITIAL_WAIT": "600",
}
"""Heartbeat TTL left at 60 s: nothing here may rely on orphan recovery."""


def _push(url: str) -> tuple[str, list[str], list[str]]:
    """One hung job, 9 jobs running when it overruns, 5 waiting for a thread."""
    client = rfetch.Client(rfetch.Config(redis_url=url))
    import limit_jobs

    hang = limit_jobs.Hang.set(client=client).perform_async()
    running = [limit_jobs.Work.set(client=client).perform_async(4.0) for _ in range(9)]
    waiting = [limit_jobs.Work.set(client=client).perform_async(0.2) for _ in range(5)]
    assert hang is not None and all(running) and all(waiting)
    return hang, running, waiting  # type: ignore[return-value]


@pytest.fixture(autouse=True)
def _jobs_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.workers import JOBS_DIR

    monkeypatch.syspath_prepend(str(JOBS_DIR))


def test_hung_job_times_out_in_a_swarm_and_nothing_else_is_lost(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records")
    worker = WorkerProcess(
        redis_server.url,
        ["-r", "limit_jobs", "-c", "10", "--prefetch", "5", "--processes", "1", "-t", "10"],
        env={**ENV, "RFETCH_TEST_RECORD": str(records.path)},
        log_dir=tmp_path,
    )
    try:
        wait_for(lambda: r.scard("processes") == 1, 20, worker.log)
        first = {c.pid for c in children(worker.pid)}
        hang, running, waiting = _push(redis_server.url)

        def timed_out() -> bool:
            entry = set_entries(r, "retry").get(hang)
            return entry is not None and entry["error_class"] == "rfetch.JobTimeout"

        wait_for(timed_out, 60, worker.log)
        # A replacement child is started, and beats.
        wait_for(
            lambda: any(c.pid not in first for c in children(worker.pid))
            and any(m.decode().split(":")[-2] not in {str(p) for p in first}
                    for m in r.smembers("processes")),
            60,
            worker.log,
        )
        others = running + waiting
        wait_for(lambda: set(records.count("done")) >= set(others), 20, worker.log)
        assert all(records.count("start")[jid] == 1 for jid in others)
        assert all(records.count("done")[jid] == 1 for jid in others)
        assert records.count("start")[hang] == 1 and records.count("done")[hang] == 0
        entry = set_entries(r, "retry")[hang]
        assert "time limit of 2 s" in str(entry["error_message"])
        # The parent logs the retired child's exit once it has reaped it.
        wait_for(lambda: f"exited with {EXIT_RETIRED}" in worker.log(), 10, worker.log)
        # The heartbeats of the children name their swarm.
        for member in r.smembers("processes"):
            info = r.hget(member, "info")
            assert info is not None and str(worker.pid) in info.decode()
    finally:
        code = worker.stop(20)
    assert code == 0


def test_hung_job_without_a_supervisor_exits_75_after_pushing_back(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records")
    worker = WorkerProcess(
        redis_server.url,
        ["-r", "limit_jobs", "-c", "10", "--prefetch", "5", "-t", "10"],
        env={**ENV, "RFETCH_TEST_RECORD": str(records.path)},
        log_dir=tmp_path,
    )
    worker.identity(r)
    hang, running, waiting = _push(redis_server.url)
    assert worker.wait(30) == EXIT_RETIRED
    assert set_entries(r, "retry")[hang]["error_class"] == "rfetch.JobTimeout"
    # The running ones finished there; the waiting ones went back to their queue unstarted.
    done = records.count("done")
    assert all(done[jid] == 1 for jid in running)
    started = records.count("start")
    not_started = [jid for jid in waiting if started[jid] == 0]
    assert r.llen("queue:default") == len(not_started)
    assert all(done[jid] == 1 for jid in waiting if started[jid])
    assert not list(r.scan_iter("queue:sq|*"))
    assert "time limit" in worker.log() and "exiting with 75" in worker.log()


def test_a_cooperative_job_stops_itself_with_job_timeout(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    records = Records(tmp_path / "records")
    worker = WorkerProcess(
        redis_server.url,
        ["-r", "limit_jobs", "-c", "2", "--job-timeout", "1"],
        env={**ENV, "RFETCH_TEST_RECORD": str(records.path)},
        log_dir=tmp_path,
    )
    try:
        identity = worker.identity(r)
        import limit_jobs

        client = rfetch.Client(rfetch.Config(redis_url=redis_server.url))
        jid = limit_jobs.Polite.set(client=client).perform_async(60.0)
        assert jid is not None
        wait_for(lambda: jid in set_entries(r, "retry"), 10, worker.log)
        assert set_entries(r, "retry")[jid]["error_class"] == "rfetch.JobTimeout"
        assert [row[3] for row in records.rows("stopped")] == ["JobTimeout"]
        assert worker.proc.poll() is None and r.sismember("processes", identity)
    finally:
        assert worker.stop(20) == 0
