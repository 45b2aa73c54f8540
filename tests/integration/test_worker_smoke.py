"""The worker smoke test: a real ``rfetch worker`` process runs a job, retries a failed one
from its retry set, and on TERM pushes the job it still holds back to its queue and exits 0.
scripts/test-versions runs it (with tests/unit) on every Python the package declares."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.gate_worker import make_due
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, JOBS_DIR, NO_SPEEDUPS, WorkerProcess

SPEEDUPS = ("hiredis", "orjson")


def events(record: Path, event: str) -> list[str]:
    if not record.exists():
        return []
    return [line.split()[1] for line in record.read_text().splitlines()
            if line.split()[0] == event]


def loaded(pid: int) -> set[str]:
    """Which of hiredis and orjson (C extensions) process ``pid`` has loaded."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {name for name in SPEEDUPS if f"/{name}/" in maps or f"/{name}." in maps}


@pytest.mark.parametrize("speedups", [True, False], ids=["default", "pure-python"])
def test_a_worker_runs_retries_and_stops_on_term(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, speedups: bool
) -> None:
    """With the default install (hiredis and orjson loaded) and with both hidden: the
    pure-Python fallback runs the same."""
    record = tmp_path / "record.txt"
    env = {**FAST_ENV, "RFETCH_TEST_RECORD": str(record)}
    if not speedups:
        env["PYTHONPATH"] = f"{JOBS_DIR}:{NO_SPEEDUPS}"
    proc = WorkerProcess(
        redis_server.url, ["-r", "smoke_jobs", "-c", "2", "-t", "1"], env=env, log_dir=tmp_path
    )
    try:
        proc.identity(r)
        # default dependencies, unless this whole run hides them (scripts/test-versions)
        hidden = not speedups or str(NO_SPEEDUPS) in os.environ.get("PYTHONPATH", "")
        assert loaded(proc.pid) == (set() if hidden else set(SPEEDUPS))
        client = Client(Config(redis_url=redis_server.url), r)
        hello = client.push("smoke_jobs.Hello", ["world"], {})
        flaky = client.push("smoke_jobs.FailsOnce", [str(tmp_path / "marker")], {"retry": 3})
        wait_for(lambda: hello in events(record, "done"), 60, lambda: proc.log())
        wait_for(lambda: r.zcard("retry") == 1, 60, lambda: f"a retry entry:\n{proc.log()}")
        assert events(record, "fail") == [flaky]
        make_due(r, "retry")
        wait_for(lambda: flaky in events(record, "done"), 60, lambda: proc.log())
        nap = client.push("smoke_jobs.Nap", [600], {})
        wait_for(lambda: nap in events(record, "start"), 60, lambda: proc.log())
    finally:
        proc.signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0, proc.log()
    back = [json.loads(raw)["jid"] for raw in r.lrange("queue:default", 0, -1)]
    assert back == [nap]  # pushed back by the stopping worker, not lost
    assert not list(r.scan_iter("queue:sq|*"))
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0
