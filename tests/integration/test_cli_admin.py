"""The admin commands of the ``rfetch`` CLI, run through click's CliRunner against
a real Redis: each command's output, exit code and effect on Redis."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis
from click.testing import CliRunner, Result

from rfetch.cli import main
from tests.support.redis_server import RedisServer, free_port
from tests.support.seed import jid_of, payload


@pytest.fixture
def rfetch(redis_server: RedisServer, r: redis.Redis) -> Any:
    runner = CliRunner()

    def run(*args: str, url: str | None = None) -> Result:
        return runner.invoke(main, [*args, "--redis-url", url or redis_server.url],
                             catch_exceptions=False)

    return run


def lines(result: Result) -> list[str]:
    return result.stdout.splitlines()


def test_stats_table_and_json(rfetch: Any, r: redis.Redis) -> None:
    r.mset({"stat:processed": 12, "stat:failed": 3, "stat:processed:2024-01-01": 4})
    r.sadd("queues", "a")
    r.lpush("queue:a", payload(jid_of(1)), payload(jid_of(2)))
    r.zadd("dead", {payload(jid_of(3)): 1})

    table = rfetch("stats")
    assert table.exit_code == 0
    assert lines(table)[0].split() == ["STAT", "VALUE"]
    assert "processed        12" in lines(table)
    assert "enqueued         2" in lines(table) and "dead             1" in lines(table)

    data = json.loads(rfetch("stats", "--json", "--days", "2").stdout)
    assert (data["processed"], data["failed"], data["enqueued"]) == (12, 3, 2)
    assert data["queues"] == {"a": 2} and len(data["history"]) == 2


def test_queues_list_pause_and_unpause(rfetch: Any, r: redis.Redis) -> None:
    r.sadd("queues", "mail", "default")
    pushed = time.time()
    r.lpush("queue:mail", payload(jid_of(1), enqueued_at=pushed - 42))

    paused = rfetch("queues", "--pause", "mail", "--pause", "default")
    assert paused.exit_code == 0
    assert lines(paused)[:2] == ["paused queue mail", "paused queue default"]
    assert r.smembers("paused") == {b"mail", b"default"}
    table = lines(paused)[2:]
    assert table[0].split() == ["QUEUE", "SIZE", "LATENCY_S", "PAUSED"]
    assert table[1].split() == ["default", "0", "0.0", "yes"]
    name, size, latency, flag = table[2].split()
    assert (name, size, flag) == ("mail", "1", "yes")
    assert 41 <= float(latency) <= 42 + (time.time() - pushed) + 1

    unpaused = rfetch("queues", "--unpause", "mail", "--json")
    assert r.smembers("paused") == {b"default"}
    assert {q["name"]: q["paused"] for q in json.loads(unpaused.stdout)} == {
        "default": True, "mail": False
    }


def test_processes_list_quiet_stop_and_errors(rfetch: Any, r: redis.Redis) -> None:
    info = {"hostname": "web-1", "pid": 42, "tag": "app", "concurrency": 5,
            "queues": ["default"], "started_at": 1_700_000_000}
    r.sadd("processes", "web-1:42:abc", "web-2:9:old")
    r.hset("web-1:42:abc", mapping={"info": json.dumps(info), "busy": 2, "beat": time.time(),
                                    "quiet": "false", "rss": 51200, "rtt_us": 90})

    listed = rfetch("processes")
    assert listed.exit_code == 0
    header, row = lines(listed)
    assert header.split()[:2] == ["IDENTITY", "TAG"]
    assert row.split() == ["web-1:42:abc", "app", "2023-11-14", "22:13:20", "50.0", "2/5",
                           "no", "yes", "default", "-"]
    r.hset("web-1:42:abc", "info", json.dumps({**info, "swarm": "web-1:40", "slot": 2}))
    assert lines(rfetch("processes"))[1].split()[-1] == "web-1:40#2"  # a swarm's worker

    quiet = rfetch("processes", "--quiet", "web-1:42")  # a unique prefix is enough
    assert quiet.exit_code == 0 and "asked web-1:42:abc to go quiet" in quiet.stdout
    stop = rfetch("processes", "--stop", "web-1:42:abc")
    assert stop.exit_code == 0
    assert r.lrange("web-1:42:abc-signals", 0, -1) == [b"TERM", b"TSTP"]

    unknown = rfetch("processes", "--stop", "nope")
    assert unknown.exit_code == 2 and "'nope' is not a known process" in unknown.output
    ambiguous = rfetch("processes", "--quiet", "web-")
    assert ambiguous.exit_code == 2 and "matches several processes" in ambiguous.output

    cleaned = rfetch("processes", "--cleanup", "--json")
    assert r.smembers("processes") == {b"web-1:42:abc"}
    assert [p["identity"] for p in json.loads(cleaned.stdout)] == ["web-1:42:abc"]


@pytest.fixture
def retries(r: redis.Redis) -> None:
    r.zadd("retry", {
        payload(jid_of(1), "app.Mail", [1, "a@x"], "mail", retry_count=5,
                error_class="SMTPError", error_message="connection refused"): 100.0,
        payload(jid_of(2), "app.Mail", [2, "b@x"], "mail", retry_count=9,
                error_class="SMTPError", error_message="timeout"): 200.0,
        payload(jid_of(3), "app.Report", [3], "low", retry_count=1,
                error_class="KeyError", error_message="'x'"): 300.0,
    })


@pytest.mark.usefixtures("retries")
def test_retries_list_with_filters_and_sort(rfetch: Any) -> None:
    listed = rfetch("retries", "list")
    assert listed.exit_code == 0
    rows = lines(listed)
    assert rows[0].split()[:4] == ["JID", "CLASS", "QUEUE", "NEXT"]
    assert [row.split()[0] for row in rows[1:4]] == [jid_of(1), jid_of(2), jid_of(3)]
    assert "SMTPError: connection refused" in rows[1] and '[1, "a@x"]' in rows[1]
    assert rows[-1] == "showing 1-3 of 3 in the set"

    worst = lines(rfetch("retries", "list", "--sort", "retry_count", "--limit", "2"))
    assert [row.split()[0] for row in worst[1:3]] == [jid_of(2), jid_of(1)]
    assert worst[-1] == "showing 1-2 of 3 in the set; next: --offset 2"

    mail = json.loads(rfetch("retries", "list", "--class", "Mail", "--grep", "TIMEOUT",
                             "--json").stdout)
    assert [j["jid"] for j in mail["jobs"]] == [jid_of(2)]

    bad = rfetch("retries", "list", "--sort", "size")
    assert bad.exit_code == 2 and "'size' is not one of 'time', 'retry_count'" in bad.output


@pytest.mark.usefixtures("retries")
def test_retries_retry_delete_kill(rfetch: Any, r: redis.Redis) -> None:
    retried = rfetch("retries", "retry", jid_of(1))
    assert retried.exit_code == 0 and retried.stdout.strip() == "retry: 1 job(s)"
    [moved] = [json.loads(x) for x in r.lrange("queue:mail", 0, -1)]
    assert moved["jid"] == jid_of(1) and moved["retry_count"] == 4
    assert r.zcard("retry") == 2

    unknown = rfetch("retries", "delete", jid_of(2), jid_of(7))
    assert unknown.exit_code == 2
    assert f"no job with jid {jid_of(7)} in the retry set" in unknown.output
    assert r.zcard("retry") == 2  # nothing done when any jid is unknown

    killed = json.loads(rfetch("retries", "kill", "--all-matching", "--class", "Report",
                               "--json").stdout)
    assert killed["done"] == 1 and killed["complete"]
    assert [json.loads(x)["jid"] for x in r.zrange("dead", 0, -1)] == [jid_of(3)]

    deleted = rfetch("retries", "delete", "--all-matching")
    assert deleted.exit_code == 0 and "delete: 1 job(s)" in deleted.stdout
    assert r.zcard("retry") == 0

    neither = rfetch("retries", "retry")
    assert neither.exit_code == 2 and "give JIDs, or --all-matching" in neither.output
    mixed = rfetch("retries", "retry", jid_of(1), "--class", "X")
    assert mixed.exit_code == 2 and "go with --all-matching" in mixed.output


def test_scheduled_retry_runs_the_job_now(rfetch: Any, r: redis.Redis) -> None:
    r.zadd("schedule", {payload(jid_of(1), "app.Later", [1], "q", retry_count=2):
                        time.time() + 3600})
    listed = rfetch("scheduled", "list")
    assert "RUN AT (UTC)" in lines(listed)[0] and jid_of(1) in lines(listed)[1]
    run_now = rfetch("scheduled", "retry", jid_of(1))
    assert run_now.exit_code == 0 and "add to queue: 1 job(s)" in run_now.stdout
    [moved] = [json.loads(x) for x in r.lrange("queue:q", 0, -1)]
    assert moved["retry_count"] == 2 and moved["enqueued_at"] == pytest.approx(time.time(), 5)
    assert r.zcard("schedule") == 0


def test_dead_list_retry_delete(rfetch: Any, r: redis.Redis) -> None:
    r.zadd("dead", {payload(jid_of(1), queue="q", retry_count=25): 1.0,
                    payload(jid_of(2), queue="q"): 2.0, payload(jid_of(3)): 3.0})
    assert "DIED (UTC)" in lines(rfetch("dead", "list"))[0]
    assert rfetch("dead", "retry", jid_of(1)).exit_code == 0
    assert json.loads(r.lindex("queue:q", 0) or b"{}")["retry_count"] == 24
    assert rfetch("dead", "delete", jid_of(2)).exit_code == 0
    assert [json.loads(x)["jid"] for x in r.zrange("dead", 0, -1)] == [jid_of(3)]
    no_kill = rfetch("dead", "kill", jid_of(3))
    assert no_kill.exit_code == 2 and "No such command 'kill'" in no_kill.output


def test_explain(rfetch: Any, r: redis.Redis) -> None:
    r.lpush("queue:q", payload(jid_of(1), queue="q"), payload(jid_of(2), queue="q"))
    r.sadd("queues", "q")

    found = rfetch("explain", jid_of(2))
    assert found.exit_code == 0
    assert found.stdout.strip() == (
        f"jid {jid_of(2)}: waiting in queue q at position 2 of 2 (1 runs next): "
        "no live process works queue q"
    )
    data = json.loads(rfetch("explain", jid_of(1), "--json").stdout)
    assert data["state"] == "queued" and data["locations"][0]["position"] == 0

    missing = rfetch("explain", "f" * 24)
    assert missing.exit_code == 1 and "not found" in missing.stdout


def test_check_exit_codes(rfetch: Any, r: redis.Redis) -> None:
    r.sadd("queues", "q", "other")
    r.lpush("queue:q", *[payload(jid_of(i), enqueued_at=time.time() - 90) for i in range(5)])

    ok = rfetch("check", "--max-latency", "600", "--max-size", "10")
    assert ok.exit_code == 0 and ok.stdout.startswith("OK 2 queue(s); largest q 5 jobs")
    too_big = rfetch("check", "--max-size", "4")
    assert too_big.exit_code == 1
    assert too_big.stdout == "CRITICAL queue q has 5 jobs (max 4)\n"
    too_slow = rfetch("check", "--max-latency", "60", "--queue", "q")
    assert too_slow.exit_code == 1 and "CRITICAL queue q latency is 9" in too_slow.stdout
    assert rfetch("check", "--max-latency", "60", "--queue", "other").exit_code == 0
    assert rfetch("check", "--max-size", "-1").exit_code == 2

    down = rfetch("check", "--max-size", "4", url=f"redis://127.0.0.1:{free_port()}/0")
    assert down.exit_code == 3 and down.stdout.startswith("UNKNOWN cannot read Redis")


def test_namespace_and_unreachable_redis(rfetch: Any, r: redis.Redis) -> None:
    r.zadd("ns:retry", {payload(jid_of(1)): 1})
    r.zadd("retry", {payload(jid_of(2)): 1})
    listed = json.loads(rfetch("retries", "list", "--namespace", "ns", "--json").stdout)
    assert [j["jid"] for j in listed["jobs"]] == [jid_of(1)]

    down = rfetch("stats", url=f"redis://127.0.0.1:{free_port()}/0")
    assert down.exit_code == 1 and "Error: Redis at redis://127.0.0.1:" in down.output


@pytest.mark.parametrize(("command", "key"), [("dead", "dead"), ("retries", "retry"),
                                              ("scheduled", "schedule")])
def test_a_set_command_alone_lists_its_jobs(
    rfetch: Any, r: redis.Redis, command: str, key: str
) -> None:
    # Like `rfetch limits` and `rfetch periodic`: no subcommand is the list, not a usage error.
    r.zadd(key, {payload(jid_of(1), queue="q"): 1.0})
    alone = rfetch(command)
    assert alone.exit_code == 0, alone.output
    assert jid_of(1) in alone.stdout and "showing 1-1 of 1 in the set" in alone.stdout
    as_json = rfetch(command, "--json")
    assert [j["jid"] for j in json.loads(as_json.stdout)["jobs"]] == [jid_of(1)]


def test_enqueue_checks_the_name_and_uses_the_class_queue(
    rfetch: Any, r: redis.Redis, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib
    import sys

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "enqjobs_cli.py").write_text(
        "import rfetch\n\nclass SendWelcome(rfetch.Job):\n    queue = 'mail'\n\n"
        "    def perform(self, user_id):\n        pass\n"
    )
    importlib.invalidate_caches()
    try:
        typo = rfetch("enqueue", "enqjobs_cli.SendWelcom", "[1]")
        assert typo.exit_code == 1 and "did you mean enqjobs_cli.SendWelcome?" in typo.output
        assert r.keys("queue:*") == []  # nothing pushed
        done = rfetch("enqueue", "enqjobs_cli.SendWelcome", "[1]")
        assert done.exit_code == 0, done.output
        assert json.loads(r.lindex("queue:mail", 0) or b"{}")["jid"] == done.stdout.strip()
        external = rfetch("enqueue", "HardWorker", "[2]", "--external")
        assert external.exit_code == 0, external.output
        assert json.loads(r.lindex("queue:default", 0) or b"{}")["class"] == "HardWorker"
    finally:
        sys.modules.pop("enqjobs_cli", None)
