"""The worker smoke test: a real ``rfetch worker`` process runs a job, retries a failed one
from its retry set, and on TERM pushes the job it still holds back to its queue and exits 0.
scripts/test-versions runs it (with tests/unit) on every Python the package declares."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.gate_worker import make_due
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess


def events(record: Path, event: str) -> list[str]:
    if not record.exists():
        return []
    return [line.split()[1] for line in record.read_text().splitlines()
            if line.split()[0] == event]


def test_a_worker_runs_retries_and_stops_on_term(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    record = tmp_path / "record.txt"
    proc = WorkerProcess(
        redis_server.url,
        ["-r", "smoke_jobs", "-c", "2", "-t", "1"],
        env={**FAST_ENV, "RFETCH_TEST_RECORD": str(record)},
        log_dir=tmp_path,
    )
    try:
        proc.identity(r)
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
