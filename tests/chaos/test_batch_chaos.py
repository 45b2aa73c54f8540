"""Chaos: a 10,000-job batch, 5% of its jobs failing on their first attempt, 3 worker
processes with a random one SIGKILLed about every 2 s (a replacement started each time)
until the batch has succeeded.

Evidence is written by the jobs outside Redis (``tests/jobs/batch_jobs.py``). Pass:
``success`` fires exactly once, after the last job succeeded; ``complete`` exactly once;
``death`` never; the batch's counters and its set of succeeded jids equal the evidence.
The run's figures (kills, re-runs, callbacks, time) are printed for the notes.
"""

from __future__ import annotations

import importlib
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import rfetch
from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.chaos import Fleet
from tests.support.redis_server import RedisServer
from tests.support.workers import JOBS_DIR

pytestmark = pytest.mark.slow

JOBS = 10_000
FAILING_SHARE = 0.05


class BatchEvidence:
    """The lines the jobs wrote (``batch_jobs.record``), read again on each call."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def lines(self) -> list[list[str]]:
        out: list[list[str]] = []
        for path in sorted(self.directory.glob("*.log")):
            text = path.read_text()
            out += [line.split("\t") for line in text[: text.rfind("\n") + 1].splitlines()]
        return out

    def callbacks(self, event: str) -> list[list[str]]:
        return [w for w in self.lines() if w[:2] == ["callback", event]]


def test_a_batch_under_kill9_fires_each_callback_once(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    sys.path.insert(0, str(JOBS_DIR))  # the workers' own module name: batch_jobs.Item
    try:
        batch_jobs = importlib.import_module("batch_jobs")
    finally:
        sys.path.remove(str(JOBS_DIR))
    ev_dir = tmp_path / "batch-evidence"
    ev_dir.mkdir()
    (tmp_path / "evidence").mkdir()
    (tmp_path / "logs").mkdir()
    env = {"RFETCH_BATCH_DIR": str(ev_dir), "RFETCH_POISON_MAX_RECOVERIES": "1000"}
    fleet = Fleet(own_redis.url, tmp_path / "logs", tmp_path / "evidence",
                  ["-r", "batch_jobs", "-c", "5", "-t", "5"], env)
    admin = own_redis.client(socket_timeout=5)
    client = Client(Config(redis_url=own_redis.url))
    evidence = BatchEvidence(ev_dir)
    rng = random.Random(16)
    started = time.monotonic()
    try:
        for _ in range(3):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        batch = rfetch.Batch(
            description="chaos", on_success=(batch_jobs.OnSuccess, {"run": "chaos"}),
            on_complete=batch_jobs.OnComplete, on_death=batch_jobs.OnDeath, client=client,
        )
        failing = set(rng.sample(range(JOBS), int(JOBS * FAILING_SHARE)))
        with batch.jobs():
            batch_jobs.Item.set(client=client).perform_bulk(
                [[n, n in failing, round(rng.uniform(0, 60), 1)] for n in range(JOBS)]
            )
        assert len(batch.jids) == JOBS
        pushed = time.monotonic()
        say(f"{JOBS} jobs pushed in one batch in {pushed - started:.1f} s")
        next_kill = time.monotonic() + 2.0
        while not evidence.callbacks("success"):
            now = time.monotonic()
            assert now - pushed < 150, "the batch did not succeed within 150 s"
            if now >= next_kill:
                victim = fleet.kill_random(rng)
                fleet.start()
                next_kill = now + 2.0 * rng.uniform(0.75, 1.25)
                say(f"SIGKILL worker pid {victim.pid} after {now - pushed:.1f} s")
            for _exited in fleet.reap_exited():
                fleet.start()
            time.sleep(0.1)
        succeeded_after = time.monotonic() - pushed
        # Long enough for every kill's jobs to be recovered and for any second callback.
        time.sleep(8)
        codes = fleet.stop_all()
    finally:
        fleet.kill_all()

    lines = evidence.lines()
    runs = Counter(w[1] for w in lines if w[0] == "run")
    oks = Counter(w[1] for w in lines if w[0] == "ok")
    fails = {w[1] for w in lines if w[0] == "fail"}
    successes, completes = evidence.callbacks("success"), evidence.callbacks("complete")
    status = rfetch.BatchStatus(batch.bid, client=client)
    done = {m.decode() for m in admin.smembers(f"b-{batch.bid}-done")} - {""}
    say(f"success after {succeeded_after:.1f} s; worker SIGKILLs: {len(fleet.kills)}")
    say(f"runs: {sum(runs.values())} for {len(runs)} jids; first-attempt failures recorded: "
        f"{len(fails)}; jobs run more than once: {sum(1 for n in runs.values() if n > 1)}; "
        f"re-runs: {sum(n - 1 for n in runs.values())}; successful runs beyond the first: "
        f"{sum(n - 1 for n in oks.values())}")
    say(f"callbacks: success {len(successes)}, complete {len(completes)}, "
        f"death {len(evidence.callbacks('death'))}")

    assert codes == [0, 0, 0]
    assert len(fleet.kills) >= 5
    assert len(successes) == 1 and len(completes) == 1
    assert evidence.callbacks("death") == []
    # success ran after the last job succeeded (every job's last successful run).
    assert float(successes[0][-1]) >= max(float(w[-1]) for w in lines if w[0] == "ok")
    success_status = json.loads(successes[0][3])
    assert json.loads(successes[0][4]) == {"run": "chaos"}
    assert (success_status["total"], success_status["pending"]) == (JOBS, 0)
    assert success_status["failures"] == 0
    # The batch's counters equal the evidence written outside Redis.
    assert set(oks) == set(batch.jids) == done
    assert (status.total, status.pending, status.failures) == (JOBS, 0, 0)
    assert status.complete and status.succeeded and not status.dead
    assert json.loads(completes[0][3])["failures"] <= len(fails)
    assert len(fails) >= 0.8 * len(failing)  # a kill between marker and raise hides a few
