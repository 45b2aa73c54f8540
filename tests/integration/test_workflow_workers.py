"""Chains, dependencies and progress with real ``rfetch worker`` processes (``-r
chaos_jobs``), their runs counted from the jobs' own evidence, written outside Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from werkzeug.test import Client as WebClient

import rfetch
from rfetch.api import Api
from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.web import WebApp
from tests.jobs.chaos_jobs import FailsTwice, Reporter
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess


def events(directory: Path) -> list[tuple[str, str, float, str]]:
    """(event, jid, time, extra) of every evidence line, in time order."""
    out = []
    for path in directory.glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split(" ", 4)
            out.append((parts[0], parts[1], float(parts[3]), parts[4] if len(parts) > 4 else ""))
    return sorted(out, key=lambda e: e[2])


@pytest.fixture
def evidence(tmp_path: Path) -> Path:
    path = tmp_path / "evidence"
    path.mkdir()
    return path


@pytest.fixture
def worker(redis_server: RedisServer, r: redis.Redis, evidence: Path, tmp_path: Path
           ) -> Iterator[WorkerProcess]:
    proc = WorkerProcess(
        redis_server.url, ["-r", "chaos_jobs", "-c", "3"],
        env={**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence)}, log_dir=tmp_path,
    )
    proc.identity(r)
    yield proc
    proc.stop()


@pytest.fixture
def client(redis_server: RedisServer) -> Client:
    return Client(Config(redis_url=redis_server.url))


def test_chain_c_runs_once_after_b_succeeded(
    worker: WorkerProcess, client: Client, r: redis.Redis, evidence: Path
) -> None:
    chain = rfetch.chain(FailsTwice.s("A"), FailsTwice.s("B", 2), FailsTwice.s("C"),
                         client=client)
    a, b, c = chain.jids
    wait_for(lambda: any(e[:2] == ("done", c) for e in events(evidence)), 30,
             lambda: f"C to run:\n{worker.log()}")
    seen = events(evidence)
    runs = [(event, extra) for event, _, _, extra in seen if event in ("start", "done", "fail")]
    assert runs == [
        ("start", "A"), ("done", "A"),
        ("start", "B"), ("fail", "B"), ("start", "B"), ("fail", "B"), ("start", "B"),
        ("done", "B"),
        ("start", "C"), ("done", "C"),
    ]
    b_done = next(t for event, jid, t, _ in seen if (event, jid) == ("done", b))
    c_start = next(t for event, jid, t, _ in seen if (event, jid) == ("start", c))
    assert c_start > b_done
    assert rfetch.result(b, 5, client) == "B" and rfetch.result(a, 5, client) == "A"
    assert r.hlen("rfetch:waiting") == 0


def test_chain_with_b_dead_marks_c_and_explain_tells_why(
    worker: WorkerProcess, client: Client, r: redis.Redis, evidence: Path
) -> None:
    chain = rfetch.chain(
        FailsTwice.s("A"), FailsTwice.s("B", 99).set(retry=1), FailsTwice.s("C"),
        FailsTwice.s("D").set(on_dependency_death="cancel"), client=client,
    )
    _a, b, c, d = chain.jids
    wait_for(lambda: r.zcard("dead") == 2, 30, lambda: f"B and C dead:\n{worker.log()}")
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert set(dead) == {b, c}
    assert dead[c]["error_class"] == "rfetch.DependencyFailed"
    assert int(r.get("rfetch:deps-cancelled") or 0) == 1
    ran = {extra for event, _, _, extra in events(evidence) if event == "start"}
    assert ran == {"A", "B"}
    explained = Api(client.config, redis=r).explain(c)
    assert any(f"dependency {b} died (RuntimeError: B fails on run" in line
               for line in explained.lines()), explained.lines()
    with pytest.raises(rfetch.JobDied, match="DependencyFailed"):
        rfetch.result(c, 1, client)
    assert Api(client.config, redis=r).waiting_count() == 0
    assert d not in dead


def test_progress_is_shown_by_the_api_and_the_busy_page(
    worker: WorkerProcess, client: Client, r: redis.Redis, evidence: Path
) -> None:
    jid = Reporter.set(client=client).perform_async(40, "resizing 4 of 10")
    assert jid is not None
    api = Api(client.config, redis=r)

    def reported() -> bool:
        return any(j.progress for p in api.processes.all() for j in p.running)

    wait_for(reported, 15, lambda: f"the progress in the heartbeat's busy jobs:\n{worker.log()}")
    [running] = [j for p in api.processes.all() for j in p.running]
    assert running.job.jid == jid
    assert running.progress is not None
    assert running.progress["percent"] == 40.0
    assert running.progress["message"] == "resizing 4 of 10"
    assert running.to_dict()["progress"]["percent"] == 40.0
    page = WebClient(WebApp(api)).get("/busy")
    html = page.get_data(as_text=True)
    assert page.status_code == 200
    assert 'value="40.0"' in html and "40%" in html and "resizing 4 of 10" in html
    from click.testing import CliRunner

    from rfetch.cli import main

    listed = CliRunner().invoke(main, ["processes", "--redis-url", client.config.redis_url])
    assert f"jid={jid}" in listed.stdout and "progress 40% resizing 4 of 10" in listed.stdout
    (evidence / "release").touch()
    wait_for(lambda: not any(p.running for p in api.processes.all()), 15, "the job to end")


def test_async_jobs_record_results_and_chain(
    redis_server: RedisServer, r: redis.Redis, client: Client, tmp_path: Path, evidence: Path
) -> None:

    worker = WorkerProcess(
        redis_server.url, ["-r", "chaos_jobs", "-r", "workflow_async_jobs", "-c", "3"],
        env={**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence)}, log_dir=tmp_path,
    )
    worker.identity(r)
    try:
        _async_results(client)
    finally:
        worker.stop()


def _async_results(client: Client) -> None:
    from tests.jobs.workflow_async_jobs import AsyncSquare

    jids = [AsyncSquare.set(client=client).perform_async(n) for n in range(20)]
    assert [rfetch.result(jid, 20, client) for jid in jids if jid] == [n * n for n in range(20)]
    chain = rfetch.chain(AsyncSquare.s(3), FailsTwice.s("after async"), client=client)
    assert rfetch.result(chain.jids[0], 20, client) == 9
