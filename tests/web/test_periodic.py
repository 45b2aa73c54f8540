"""Periodic schedules in the web UI, the CLI and the metrics: the page, pause and run now
against a real ``rfetch worker`` (pushes stop while paused, run now pushes one job), the
dashboard's and ``rfetch check``'s warning when no process leads, the counters."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.cli import main
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.web import flash, post, text
from tests.support.workers import WorkerProcess

NAME = "every-second"
STATE = f"rfetch:periodic:{NAME}"


def periodic_jobs(r: redis.Redis) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in r.lrange("queue:periodic", 0, -1)]


def pushed(r: redis.Redis) -> int:
    return int(r.hget(STATE, "pushed") or 0)


def cursor(r: redis.Redis) -> int:
    return int(r.hget(STATE, "cursor") or 0)


@pytest.fixture
def leader(redis_server: RedisServer, r: redis.Redis, tmp_path: Path) -> Iterator[WorkerProcess]:
    """A worker that leads and pushes a per-second schedule to queue ``periodic``, which it
    does not fetch (the jobs stay in the queue, to be counted)."""
    worker = WorkerProcess(
        redis_server.url, ["-r", "periodic_jobs", "-q", "other"],
        env={"RFETCH_TEST_PERIODIC": NAME, "RFETCH_LEADER_TTL": "5"}, log_dir=tmp_path,
    )
    wait_for(lambda: pushed(r) >= 1, 30, lambda: f"a first tick:\n{worker.log()}")
    yield worker
    worker.signal(signal.SIGTERM)
    worker.wait(30)


def test_pause_stops_the_pushes_until_unpaused_and_run_now_pushes_one(
    client: Client, r: redis.Redis, leader: WorkerProcess
) -> None:
    response = post(client, f"/periodic/{NAME}", {"action": "pause"}, page="/periodic")
    assert f"Paused {NAME}" in flash(client, response)
    assert r.hget(STATE, "paused") == b"1"
    count, since = pushed(r), cursor(r)
    wait_for(lambda: cursor(r) >= since + 3, 15, "three ticks to pass while paused")
    assert pushed(r) == count
    assert len(periodic_jobs(r)) == count

    response = post(client, f"/periodic/{NAME}", {"action": "run"}, page="/periodic")
    message = flash(client, response)
    assert f"Pushed one job of {NAME} now" in message
    jobs = periodic_jobs(r)
    assert len(jobs) == count + 1
    newest = jobs[0]
    assert newest["jid"] in message
    assert newest["periodic"] == NAME
    assert newest["class"] == "periodic_jobs.PeriodicTick"
    assert isinstance(newest["tick"], int)
    assert r.hget(STATE, "run_now_jid") == str(newest["jid"]).encode()
    assert pushed(r) == count  # run now is outside the tick guard and the counters

    post(client, f"/periodic/{NAME}", {"action": "unpause"}, page="/periodic")
    assert not r.hexists(STATE, "paused")
    wait_for(lambda: pushed(r) >= count + 2, 15, "pushes to resume")
    ticks = [job["tick"] for job in periodic_jobs(r) if job["jid"] != newest["jid"]]
    assert len(ticks) == len(set(ticks))


def test_the_page_lists_schedules_and_the_leader(
    client: Client, r: redis.Redis, leader: WorkerProcess
) -> None:
    page = text(client.get("/periodic"))
    assert f'data-periodic="{NAME}"' in page
    assert "<code>* * * * * *</code>" in page
    assert f":{leader.pid}:" in page
    assert 'href="/periodic"' in text(client.get("/"))  # in the navigation
    assert "leader-warning" not in text(client.get("/"))


def test_unknown_schedule_and_action(client: Client, r: redis.Redis) -> None:
    response = post(client, "/periodic/nope", {"action": "run"}, page="/periodic")
    assert "No periodic schedule nope" in flash(client, response)
    r.hset("rfetch:periodic", "s", json.dumps({"cron": "@daily", "class": "X"}))
    assert post(client, "/periodic/s", {"action": "explode"}, page="/periodic").status_code == 400


def test_no_leader_is_warned_on_the_dashboard_and_by_check(
    client: Client, r: redis.Redis, redis_server: RedisServer
) -> None:
    runner = CliRunner()
    url = ["--redis-url", redis_server.url]
    assert "leader-warning" not in text(client.get("/"))  # no schedules: nothing to warn
    assert runner.invoke(main, ["check", *url]).exit_code == 0
    r.hset("rfetch:periodic", "nightly", json.dumps({"cron": "0 2 * * *", "class": "X"}))
    page = text(client.get("/"))
    assert "leader-warning" in page
    assert "no leader has renewed its lease within leader_ttl" in page
    assert "No process has renewed the leader lease" in text(client.get("/periodic"))
    checked = runner.invoke(main, ["check", *url])
    assert checked.exit_code == 1
    assert checked.output.startswith("CRITICAL no leader has renewed")
    r.hset("rfetch:leader", mapping={"token": "t", "identity": "h:1:abc", "since": 1.0})
    assert runner.invoke(main, ["check", *url]).exit_code == 0


def test_cli_lists_pauses_unpauses_and_runs(
    r: redis.Redis, redis_server: RedisServer, leader: WorkerProcess
) -> None:
    runner = CliRunner()
    url = ["--redis-url", redis_server.url]
    listed = runner.invoke(main, ["periodic", "list", *url])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].startswith("leader: ") and f":{leader.pid}:" in lines[0]
    assert lines[1].split()[:4] == ["NAME", "CRON", "TZ", "QUEUE"]
    assert lines[2].split()[0] == NAME
    assert runner.invoke(main, ["periodic", "pause", NAME, *url]).exit_code == 0
    data = json.loads(runner.invoke(main, ["periodic", "list", "--json", *url]).output)
    assert data["schedules"][0]["paused"] is True
    assert data["leader"]["present"] is True
    ran = runner.invoke(main, ["periodic", "run", NAME, *url])
    assert ran.exit_code == 0
    assert periodic_jobs(r)[0]["jid"] == ran.output.strip()
    assert runner.invoke(main, ["periodic", "unpause", NAME, *url]).exit_code == 0
    assert not r.hexists(STATE, "paused")
    missing = runner.invoke(main, ["periodic", "pause", "nope", *url])
    assert missing.exit_code == 1 and "no periodic schedule 'nope'" in missing.output


def test_metrics_count_ticks_and_elections(
    client: Client, r: redis.Redis, leader: WorkerProcess
) -> None:
    body = text(client.get("/metrics"))
    values = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in body.splitlines() if line and not line.startswith("#")
    }
    assert values[f'rfetch_periodic_ticks_pushed_total{{schedule="{NAME}"}}'] >= 1
    assert values[f'rfetch_periodic_ticks_skipped_total{{schedule="{NAME}"}}'] == 0
    assert values["rfetch_leader_changes_total"] == 1
    assert values["rfetch_leader_present"] == 1


def test_api_reads_next_tick_and_leader(api: Api, r: redis.Redis) -> None:
    r.hset("rfetch:periodic", "nightly",
           json.dumps({"cron": "0 2 * * *", "tz": "Europe/Berlin", "class": "Report",
                       "args": ["daily"], "queue": "reports", "catch_up": 3600}))
    r.hset("rfetch:periodic:nightly", mapping={"last_tick": 1_790_000_000, "pushed": 4,
                                               "skipped": 2, "paused": 1})
    (info,) = api.periodic()
    assert info.next_tick is not None and info.next_tick > 1_790_000_000
    assert (info.pushed, info.skipped, info.caught_up, info.paused) == (4, 2, 0, True)
    assert info.to_dict()["queue"] == "reports"
    assert not api.leader().present
    assert api.periodic_count() == 1
