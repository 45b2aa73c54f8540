"""Cancellation: ``rfetch.api.cancel`` and ``rfetch cancel`` on a queued, a scheduled, a
retrying, a dead and an unknown job (here), and on running jobs, cooperative and hung, with
real worker processes (``test_cancel_running`` below)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

import rfetch
from rfetch.api import Api
from rfetch.cli import main
from tests.support.redis_server import RedisServer
from tests.support.swarm import Records, children, set_entries
from tests.support.wait import wait_for
from tests.support.workers import JOBS_DIR, WorkerProcess


@pytest.fixture
def api(config: rfetch.Config, r: redis.Redis) -> Api:
    return Api(config)


@pytest.fixture
def client(config: rfetch.Config) -> rfetch.Client:
    return rfetch.Client(config)


class Mail(rfetch.Job):
    queue = "mail"

    def perform(self, *args: object) -> None:
        pass


def test_a_queued_job_is_deleted_and_marked(
    api: Api, client: rfetch.Client, r: redis.Redis
) -> None:
    keep = Mail.set(client=client).perform_async(1)
    jid = Mail.set(client=client).perform_async(2)
    assert jid is not None
    result = api.cancel(jid, reason="typo in the address")
    assert result.state == "deleted" and result.cancelled
    assert result.places == ["deleted from queue mail"]
    assert [json.loads(raw)["jid"] for raw in r.lrange("queue:mail", 0, -1)] == [keep]
    mark = json.loads(r.get(f"cancel:{jid}") or b"{}")
    assert mark["reason"] == "typo in the address" and mark["dead"] is False
    assert 0 < r.ttl(f"cancel:{jid}") <= 24 * 3600


def test_a_scheduled_job_is_deleted_or_sent_to_the_dead_set(
    api: Api, client: rfetch.Client, r: redis.Redis
) -> None:
    dropped = Mail.set(client=client).perform_in(3600, 1)
    buried = Mail.set(client=client).perform_in(3600, 2)
    assert dropped is not None and buried is not None
    assert api.cancel(dropped).state == "deleted"
    result = api.cancel(buried, dead=True, reason="customer left")
    assert result.places == ["removed from the scheduled set and put in the dead set"]
    assert r.zcard("schedule") == 0
    dead = set_entries(r, "dead")
    assert list(dead) == [buried]
    assert dead[buried]["error_class"] == "rfetch.JobCancelled"
    assert dead[buried]["error_message"] == "cancelled: customer left"


def test_a_job_in_the_retry_set_is_deleted(api: Api, r: redis.Redis) -> None:
    payload = {"class": "Mail", "args": [], "jid": "a" * 24, "queue": "mail",
               "retry": True, "retry_count": 1, "error_class": "RuntimeError"}
    r.zadd("retry", {json.dumps(payload): 2e9})
    assert api.cancel("a" * 24).state == "deleted"
    assert r.zcard("retry") == 0


def test_dead_and_unknown_jids_say_so_and_leave_no_mark(api: Api, r: redis.Redis) -> None:
    payload = {"class": "Mail", "args": [], "jid": "d" * 24, "queue": "mail"}
    r.zadd("dead", {json.dumps(payload): 1e9})
    dead = api.cancel("d" * 24)
    assert dead.state == "dead" and not dead.cancelled
    assert "already in the dead set" in dead.text
    unknown = api.cancel("f" * 24)
    assert unknown.state == "not_found" and "finished" in unknown.text
    assert not r.exists(f"cancel:{'d' * 24}", f"cancel:{'f' * 24}")
    with pytest.raises(ValueError, match="jid"):
        api.cancel("")


def test_a_job_a_worker_buries_while_the_cancel_looks_says_the_cancel_took(
    api: Api, r: redis.Redis
) -> None:
    """Found by the model-based test: a worker read the mark and buried the job as
    rfetch.JobCancelled before the lookup reached the dead set. That cancel took effect;
    an older JobCancelled entry is still "already in the dead set"."""
    now = time.time()
    for jid, died in (("e" * 24, now + 60), ("c" * 24, now - 60)):
        payload = {"class": "Mail", "args": [], "jid": jid, "queue": "mail",
                   "error_class": "rfetch.JobCancelled", "failed_at": died}
        r.zadd("dead", {json.dumps(payload): died})
    buried_now = api.cancel("e" * 24, dead=True)
    assert buried_now.state == "cancelling" and buried_now.cancelled
    assert "moved to the dead set" in buried_now.text
    earlier = api.cancel("c" * 24, dead=True)
    assert earlier.state == "dead" and not earlier.cancelled


def test_cli_cancel(redis_server: RedisServer, client: rfetch.Client, r: redis.Redis) -> None:
    runner = CliRunner()
    jid = Mail.set(client=client).perform_async(1)
    assert jid is not None
    result = runner.invoke(main, ["cancel", jid, "--dead", "--redis-url", redis_server.url])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"jid {jid}: removed from queue mail and put in the dead set"
    again = runner.invoke(main, ["cancel", jid, "--json", "--redis-url", redis_server.url])
    assert again.exit_code == 1
    assert json.loads(again.output)["state"] == "dead"
    blank = runner.invoke(main, ["cancel", " ", "--redis-url", redis_server.url])
    assert blank.exit_code == 2 and "a jid is needed" in blank.output


def test_namespaced_marks(redis_server: RedisServer, r: redis.Redis, tmp_path: Path) -> None:
    config = rfetch.Config(redis_url=redis_server.url, namespace="ns")
    jid = Mail.set(client=rfetch.Client(config)).perform_in(60, 1)
    assert jid is not None
    assert Api(config).cancel(jid).state == "deleted"
    assert r.exists(f"ns:cancel:{jid}") and r.zcard("ns:schedule") == 0


# -- running jobs, with real worker processes ----------------------------------------------

WORKER_ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.5",
    "RFETCH_JOB_TIMEOUT_GRACE": "1",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
    "RFETCH_POLL_INITIAL_WAIT": "600",
}


@pytest.fixture
def limit_jobs(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(JOBS_DIR))
    import limit_jobs

    return limit_jobs


def test_a_running_cooperative_job_stops_and_goes_to_the_dead_set_when_asked(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    client: rfetch.Client, limit_jobs: Any,
) -> None:
    records = Records(tmp_path / "records")
    worker = WorkerProcess(redis_server.url, ["-r", "limit_jobs", "-c", "2"],
                           env={**WORKER_ENV, "RFETCH_TEST_RECORD": str(records.path)},
                           log_dir=tmp_path)
    try:
        identity = worker.identity(r)
        jid = limit_jobs.Polite.set(client=client).perform_async(60.0)
        wait_for(lambda: records.count("start")[jid] == 1, 10, worker.log)
        wait_for(lambda: api.explain(jid).state == "running", 10, worker.log)
        result = api.cancel(jid, dead=True, reason="operator")
        assert result.state == "cancelling", result.text
        wait_for(lambda: jid in set_entries(r, "dead"), 10, worker.log)
        entry = set_entries(r, "dead")[jid]
        assert entry["error_class"] == "rfetch.JobCancelled"
        assert entry["error_message"] == "cancelled: operator"
        assert [row[3] for row in records.rows("stopped")] == ["JobCancelled"]
        assert [row[3] for row in records.rows("died")] == ["rfetch.JobCancelled"]
        assert r.zcard("retry") == 0 and not r.exists("queue:default")
        assert worker.proc.poll() is None and r.sismember("processes", identity)
    finally:
        assert worker.stop(20) == 0


def test_a_running_hung_job_is_stopped_after_the_grace_and_its_worker_replaced(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, api: Api,
    client: rfetch.Client, limit_jobs: Any,
) -> None:
    records = Records(tmp_path / "records")
    worker = WorkerProcess(redis_server.url,
                           ["-r", "limit_jobs", "-c", "2", "--processes", "1", "-t", "5"],
                           env={**WORKER_ENV, "RFETCH_TEST_RECORD": str(records.path)},
                           log_dir=tmp_path)
    try:
        wait_for(lambda: r.scard("processes") == 1, 20, worker.log)
        first = {c.pid for c in children(worker.pid)}
        jid = limit_jobs.Hang.set(client=client, timeout=600).perform_async()
        wait_for(lambda: records.count("start")[jid] == 1, 10, worker.log)
        wait_for(lambda: api.explain(jid).state == "running", 10, worker.log)
        assert api.cancel(jid).state == "cancelling"
        wait_for(lambda: [row[3] for row in records.rows("died")] == ["rfetch.JobCancelled"],
                 10, worker.log)
        wait_for(lambda: any(c.pid not in first for c in children(worker.pid)), 10, worker.log)
        wait_for(lambda: "ignored its cancel" in worker.log(), 10, "the log line of the kill")
        # Dropped: not retried, not dead (not asked), not pushed back.
        assert r.zcard("retry") == 0 and r.zcard("dead") == 0
        assert not r.exists("queue:default")
        assert records.count("start")[jid] == 1
    finally:
        assert worker.stop(20) == 0
