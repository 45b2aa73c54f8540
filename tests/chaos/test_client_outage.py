"""Chaos at the client (reliable push): Redis goes away while the application pushes.

Reliable push keeps each job the client could not write in a buffer, returns its jid all
the same, and delivers the buffer once Redis answers. With the durable spool
(``Config.push_spool``), jobs pushed during the outage also survive the exit of the pushing
process: a later process delivers them. Workers run throughout, so every job is also seen
to run, counted from the jobs' own evidence.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import rfetch
from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.chaos import Evidence, Fleet, leftovers
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not hasattr(rfetch.Client, "flush"), reason="reliable push (Client.flush) not built yet"
    ),
]

JOBS = 500


@pytest.fixture
def fleet(own_redis: RedisServer, tmp_path: Path) -> Fleet:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    return Fleet(own_redis.url, tmp_path, evidence_dir, ["-c", "5"])


def test_jobs_pushed_while_redis_is_down_are_delivered_and_run(
    own_redis: RedisServer, fleet: Fleet, say: Callable[[str], None]
) -> None:
    evidence = Evidence(fleet.evidence_dir)
    admin = own_redis.client(socket_timeout=5)
    client = Client(Config(redis_url=own_redis.url, network_timeout=1.0, block_timeout=0.5))
    jids: list[str | None] = []
    hundred_pushed = threading.Event()

    def app() -> None:  # the application, pushing one job at a time, about 2 s in all
        for n in range(JOBS):
            jids.append(client.push("chaos_jobs.Work", [1, n]))
            if n == 99:
                hundred_pushed.set()
            time.sleep(0.004)

    try:
        for _ in range(2):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        pusher = threading.Thread(target=app)
        pusher.start()
        assert hundred_pushed.wait(10)
        own_redis.stop()  # while the app goes on pushing
        pusher.join(30)
        buffered = client.pending()
        assert not pusher.is_alive()
        assert all(jid is not None for jid in jids) and len(jids) == JOBS
        assert 0 < buffered <= JOBS - 100  # pushed while Redis was down: kept, jids returned

        own_redis.start()
        assert client.flush(timeout=10) == 0
        assert client.pending() == 0
        done = wait_for(lambda: not evidence.poll().lost(jids), 30, fail=False)
        say(
            f"{JOBS} pushed, {buffered} of them while Redis was stopped; "
            f"run: {JOBS - len(evidence.lost(jids))}, twice: {evidence.duplicates()}"
        )
        assert done, f"{len(evidence.lost(jids))} job(s) never ran"
        # One push may be in flight when Redis stops: written, but its reply lost, so also
        # buffered (the first one buffered) and delivered again: at least once. No other
        # job may run twice.
        twice = [jid for jid, n in evidence.dones.items() if n > 1]
        assert set(twice) <= {jids[JOBS - buffered]}
        assert evidence.duplicates() <= 1
        assert fleet.stop_all() == [0, 0]
        assert leftovers(admin) == {}
    finally:
        fleet.kill_all()
        admin.close()


APP = """
import json, sys
from rfetch.push.client import Client
from rfetch.config import Config

client = Client(Config(redis_url=sys.argv[1], push_spool=sys.argv[2], push_exit_timeout=0.5,
                       network_timeout=1.0, block_timeout=0.5))
before = client.pending()
if sys.argv[3] == "push":
    jids = [client.push("chaos_jobs.Work", [1, n]) for n in range(int(sys.argv[4]))]
    print(json.dumps({"before": before, "jids": jids, "pending": client.pending()}))
else:
    left = client.flush(timeout=10)
    print(json.dumps({"before": before, "left": left, "pending": client.pending()}))
"""


def run_app(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", APP, *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def test_spooled_jobs_survive_a_restart_of_the_pushing_process(
    own_redis: RedisServer, fleet: Fleet, tmp_path: Path, say: Callable[[str], None]
) -> None:
    evidence = Evidence(fleet.evidence_dir)
    spool = str(tmp_path / "spool")
    admin = own_redis.client(socket_timeout=5)
    try:
        for _ in range(2):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        own_redis.stop()
        first = run_app(own_redis.url, spool, "push", str(JOBS))  # pushes, then exits
        jids = first["jids"]
        assert isinstance(jids, list) and len(set(jids)) == JOBS and None not in jids
        assert first["pending"] == JOBS
        assert "spool" in str(first["stderr"])  # it says where the undelivered jobs are

        own_redis.start()
        second = run_app(own_redis.url, spool, "deliver")  # a new process
        say(
            f"first process: {JOBS} pushed while Redis was stopped, {first['pending']} "
            f"spooled at exit; second process found {second['before']} and left "
            f"{second['left']}"
        )
        assert second["before"] == JOBS
        assert second["left"] == 0 and second["pending"] == 0

        wait_for(
            lambda: not evidence.poll().lost(jids),
            30,
            lambda: f"every job to run ({len(evidence.lost(jids))} job(s) never ran)",
        )
        # Redis was down for the whole first process: nothing was in flight, so nothing
        # may be delivered or run twice.
        assert evidence.duplicates() == 0
        assert all(evidence.dones[jid] == 1 for jid in jids)
        assert fleet.stop_all() == [0, 0]
        assert leftovers(admin) == {}
    finally:
        fleet.kill_all()
        admin.close()
