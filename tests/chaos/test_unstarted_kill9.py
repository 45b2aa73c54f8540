"""Chaos: repeated kill -9 of workers whose ``-r`` modules also define an async job class,
draining jobs that never fail.

Such a worker once counted the event loop's slots as room for sync jobs and held about a
hundred of them; each kill -9 then counted every held job against its poison-pill limit,
so never-failing jobs went to the dead set as ``rfetch.PoisonPill`` ("died while running
it") and a batch fired its death callback instead of its success callback. A worker holds
only what its threads can run, and a job a killed process held but never started does not
count (start marks, ``rfetch.worker.started``). Pass: no job in the dead set, every job
run, a batch's success callback exactly once and its death callback never.
"""

from __future__ import annotations

import importlib
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

import rfetch
from rfetch.config import Config
from rfetch.push.client import Client
from tests.chaos.test_batch_chaos import BatchEvidence
from tests.support.chaos import Evidence, Fleet
from tests.support.redis_server import RedisServer
from tests.support.swarm import children
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, JOBS_DIR, WorkerProcess

pytestmark = pytest.mark.slow

KILLS = 10
"""kill -9s per run: more than enough for a job held by every killed process to reach the
default poison-pill limit (3) many times over."""


def _jobs_module(name: str) -> ModuleType:
    sys.path.insert(0, str(JOBS_DIR))  # the workers' own module names
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(JOBS_DIR))


def test_killed_swarm_children_bury_no_job_that_never_fails(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    admin = own_redis.client(socket_timeout=5)
    client = Client(Config(redis_url=own_redis.url))
    jids = client.push_bulk("chaos_jobs.Work", [[50] for _ in range(900)])
    swarm = WorkerProcess(
        own_redis.url,
        ["--processes", "2", "-c", "3", "-r", "chaos_jobs", "-r", "async_jobs"],
        {**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence_dir)},
        tmp_path,
    )
    evidence = Evidence(evidence_dir)
    rng = random.Random(24)
    kills: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while len(kills) < KILLS and time.monotonic() < deadline:
            # A child that has started jobs (it is past its start-up) is the victim.
            runs = evidence.poll().start_pids.values()
            started = {pid for pids in runs for _, pid in pids}
            live = [c.pid for c in children(swarm.pid) if c.pid in started - set(kills)]
            if live:
                victim = rng.choice(live)
                os.kill(victim, signal.SIGKILL)
                kills.append(victim)
            time.sleep(rng.uniform(0.6, 1.0))
        assert len(kills) == KILLS, swarm.log()
        wait_for(lambda: not evidence.poll().lost(jids) or admin.zcard("dead") > 0, 120,
                 swarm.log)
        time.sleep(2)  # a burial after the last job finished would show now
        dead = admin.zcard("dead")
        lost = evidence.poll().lost(jids)
        say(f"{KILLS} kill -9 of swarm children: dead set {dead}, not run {len(lost)} of "
            f"{len(jids)}, re-runs {evidence.reruns()}")
        assert dead == 0, f"{dead} never-failing job(s) buried as poison pills"
        assert lost == []
    finally:
        assert swarm.stop(30) == 0


def test_a_batch_under_kill9_succeeds_once_and_never_dies(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    batch_jobs = _jobs_module("batch_jobs")
    ev_dir = tmp_path / "batch-evidence"
    ev_dir.mkdir()
    (tmp_path / "evidence").mkdir()
    (tmp_path / "logs").mkdir()
    fleet = Fleet(own_redis.url, tmp_path / "logs", tmp_path / "evidence",
                  ["-r", "batch_jobs", "-r", "async_jobs", "-c", "3"],
                  {"RFETCH_BATCH_DIR": str(ev_dir)})
    admin = own_redis.client(socket_timeout=5)
    client = Client(Config(redis_url=own_redis.url))
    evidence = BatchEvidence(ev_dir)
    rng = random.Random(400)
    try:
        for _ in range(2):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        batch = rfetch.Batch(
            description="kill -9", on_success=(batch_jobs.OnSuccess, {"run": "kill9"}),
            on_complete=batch_jobs.OnComplete, on_death=batch_jobs.OnDeath, client=client,
        )
        with batch.jobs():
            batch_jobs.Item.set(client=client).perform_bulk(
                [[n, False, 150] for n in range(400)]
            )
        pushed = time.monotonic()
        # Until KILLS kills, or the batch has ended (its jobs take about 10 s of 6 threads).
        while len(fleet.kills) < KILLS and not (
            evidence.callbacks("success") or evidence.callbacks("death")
        ):
            assert time.monotonic() - pushed < 180, "kills did not happen within 180 s"
            victim = fleet.kill_random(rng)
            fleet.start().identity(admin)
            say(f"SIGKILL worker pid {victim.pid} after {time.monotonic() - pushed:.1f} s")
            for _exited in fleet.reap_exited():
                fleet.start()
            time.sleep(rng.uniform(0.3, 0.8))
        wait_for(
            lambda: bool(evidence.callbacks("success") or evidence.callbacks("death")), 120,
            fleet.logs,
        )
        time.sleep(5)  # a second callback, or a late death, would show now
        codes = fleet.stop_all()
    finally:
        fleet.kill_all()
    successes, deaths = evidence.callbacks("success"), evidence.callbacks("death")
    say(f"{len(fleet.kills)} kill -9: success callbacks {len(successes)}, death callbacks "
        f"{len(deaths)}, dead set {admin.zcard('dead')}")
    assert codes == [0, 0]
    assert len(fleet.kills) >= 5
    assert len(successes) == 1
    assert deaths == []
    assert admin.zcard("dead") == 0
