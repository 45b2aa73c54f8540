"""Chaos: a poison pill (a job that kills its worker process).

A job that kills its worker (``os._exit(1)``) is recovered from each dead worker and kills
the next one, until it has been recovered ``poison_max_recoveries`` (3) times within the
window: then orphan recovery sends it to the dead set with ``error_class``
``rfetch.PoisonPill`` instead of running it again. Replacement workers keep being started,
as a supervisor would, and normal jobs keep arriving; every one of them must finish.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.chaos import Evidence, Fleet, leftovers, private_lists
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

POISON_MAX_RECOVERIES = 3


def test_job_that_kills_its_worker_ends_in_the_dead_set_and_others_finish(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    env = {"RFETCH_POISON_MAX_RECOVERIES": str(POISON_MAX_RECOVERIES)}
    # One thread and nothing fetched ahead: a job that ran beside the pill in each of the
    # workers it killed would be recovered as often as the pill and buried with it (a known
    # limit of counting recoveries per job, as Sidekiq Pro's super_fetch does; see
    # docs/guarantees.md). This test is about the pill itself and the jobs after it.
    fleet = Fleet(own_redis.url, tmp_path, evidence_dir, ["-c", "1", "--prefetch", "0"], env)
    evidence = Evidence(evidence_dir)
    admin = own_redis.client(socket_timeout=5)
    client = Client(Config(redis_url=own_redis.url))
    try:
        for _ in range(2):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        pill = client.push("chaos_jobs.Crash", [])
        assert pill is not None
        jids = client.push_bulk("chaos_jobs.Work", [[n % 5] for n in range(20)])
        deaths: list[int | None] = []
        started = time.monotonic()
        # About 4 s per recovery; 30 s more for each recovery stalled by a recovery lock
        # that a worker dying in the middle of its own reap leaves behind (see
        # test_recovery_lock_of_a_dead_process_does_not_stall_recovery).
        deadline = started + 100
        while time.monotonic() < deadline:
            for proc in fleet.reap_exited():
                deaths.append(proc.proc.returncode)
                fleet.start()  # the supervisor restarts it
            if len(jids) < 200:  # the queue stays busy while the pill does its rounds
                jids += client.push_bulk("chaos_jobs.Work", [[n % 5] for n in range(10)])
            evidence.poll()
            if (
                admin.zcard("dead")
                and not evidence.lost(jids)
                and not admin.exists("queue:default")
                and not private_lists(admin)
            ):
                break
            time.sleep(0.25)
        dead = [json.loads(raw) for raw in admin.zrange("dead", 0, -1)]
        lost = evidence.lost(jids)
        logs = fleet.logs()
        say(
            f"after {time.monotonic() - started:.1f} s: "
            f"pill started {evidence.starts[pill]} times, {len(deaths)} workers died "
            f"{deaths}; dead set: {[(d['jid'], d.get('error_class')) for d in dead]}; "
            f"{len(jids)} other jobs, {len(lost)} not finished, "
            f"{evidence.duplicates()} finished twice"
        )

        assert [d["jid"] for d in dead] == [pill], f"dead set: {dead}"
        assert dead[0]["error_class"] == "rfetch.PoisonPill"
        assert dead[0]["class"] == "chaos_jobs.Crash"
        assert f"recovered {POISON_MAX_RECOVERIES} times" in dead[0]["error_message"]
        # It ran in the first worker and after each recovery but the last, which buries it.
        assert evidence.starts[pill] == POISON_MAX_RECOVERIES
        assert deaths == [1] * POISON_MAX_RECOVERIES
        assert f"poison pill jid={pill} sent to the dead set" in logs
        assert lost == [], f"{len(lost)} other job(s) never finished"
        admin.zrem("dead", *admin.zrange("dead", 0, -1))
        assert leftovers(admin) == {}
        assert not admin.exists(f"rfetch:recoveries:{pill}")
    finally:
        fleet.kill_all()
        admin.close()


def test_recovery_lock_of_a_dead_process_does_not_stall_recovery(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    fleet = Fleet(own_redis.url, tmp_path, evidence_dir, ["-c", "2", "--prefetch", "0"])
    evidence = Evidence(evidence_dir)
    admin = own_redis.client(socket_timeout=5)
    client = Client(Config(redis_url=own_redis.url))
    try:
        doomed = fleet.start()
        doomed_identity = doomed.identity(admin)
        jids = client.push_bulk("chaos_jobs.Work", [[60_000], [60_000]])
        wait_for(lambda: len(evidence.poll().starts) == 2, 10, "both jobs to start")
        survivor = fleet.start()
        survivor.identity(admin)
        fleet.kill(doomed)
        # The state a worker leaves when it dies in the middle of a check: its lock.
        admin.set("rfetch:lock:recovery", doomed_identity, ex=30)
        killed_at = time.monotonic()
        # TTL 2 s + check interval (0.5-1.5 s) + second look 1.5 s, with a margin.
        recovered = wait_for(
            lambda: all(len(evidence.poll().start_pids[j]) == 2 for j in jids), 10, fail=False
        )
        say(f"jobs of the dead lock holder running elsewhere: {recovered} after "
            f"{time.monotonic() - killed_at:.1f} s")
        assert recovered
    finally:
        fleet.kill_all()
        admin.close()
