"""Chaos, graceful shutdown only: TSTP/TERM cycles while jobs run, no kills.

Workers are quieted (TSTP) and then stopped (TERM), or stopped straight away, one after the
other while a replacement starts each time, as a rolling deploy does. Quiet pushes back the
jobs fetched but not started; TERM waits for the running ones (all shorter than ``-t``).
Nothing may be lost and nothing may run twice, counted from the jobs' own evidence.

What a loaded machine may legitimately change is left open: how long the run takes, and
one log line. A worker that stops cleanly between another worker's read of
``rfetch:identities`` and its look for the heartbeat (one orphan check) becomes a suspect,
and is "reaped" at the next look with nothing to push back. What may not happen is a reap
that pushes back jobs: a stopped worker must leave its private lists empty, and the
heartbeat TTL here (20 s, the default) is far beyond any stall load causes, so no live
worker is taken for dead.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.worker.launcher import HANDLED_SIGNALS, Launcher
from rfetch.worker.registry import Registry
from tests.support.chaos import (
    ChaosPlan,
    Evidence,
    Fleet,
    job_ms,
    leftovers,
    registry_leftovers,
)
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.slow

JOBS = 6000
REFILL = 2000
MIN_CYCLES = 6
TERM_SENT = float("inf")
STABLE_HEARTBEAT = {"RFETCH_HEARTBEAT_TTL": "20"}
"""The default TTL: the chaos tier's 2 s (``FAST_ENV``) is short enough for a worker
starved of CPU on a loaded machine to miss it; this test has no kill to recover from."""


@dataclass
class RollingStops:
    """The workers being stopped, one cycle at a time: a random live worker is quieted
    (TSTP) and stopped (TERM) a little later, or stopped at once, and a replacement is
    started. Only processes of the fleet are signalled."""

    fleet: Fleet
    admin: redis.Redis
    rng: random.Random
    stopping: list[tuple[WorkerProcess, float]] = field(default_factory=list)
    """(worker, when to TERM it: monotonic seconds, or ``TERM_SENT``)."""
    exit_codes: list[int | None] = field(default_factory=list)
    cycles: int = 0
    quieted: int = 0
    terminated: int = 0

    def cycle(self, now: float) -> None:
        victim = self.rng.choice(self.fleet.live)
        self.fleet.live.remove(victim)
        self.cycles += 1
        if self.rng.random() < 0.6:
            victim.signal(signal.SIGTSTP)  # quiet now, stop a little later
            self.stopping.append((victim, now + self.rng.uniform(0.3, 0.8)))
            self.quieted += 1
        else:
            self.stopping.append((victim, now))
        # Up before it may be stopped: a TERM before the worker has installed its handlers
        # (during its imports) kills it outright, as it would any program.
        self.fleet.start().identity(self.admin)

    def advance(self, now: float) -> None:
        """TERM the workers whose time has come; collect those that exited."""
        for index, (proc, term_at) in enumerate(self.stopping):
            if now >= term_at:
                proc.signal(signal.SIGTERM)
                self.terminated += 1
                self.stopping[index] = (proc, TERM_SENT)
        for proc, term_at in list(self.stopping):
            if term_at == TERM_SENT and proc.proc.poll() is not None:
                self.exit_codes.append(proc.wait(1))
                self.fleet.gone.append(proc)
                self.stopping.remove((proc, term_at))

    def give_back(self) -> None:
        """After a failure: the workers being stopped are the fleet's to kill."""
        for proc, _ in self.stopping:
            self.fleet.live.append(proc)


def test_tstp_and_term_cycles_lose_nothing_and_run_nothing_twice(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    rng = random.Random(2)
    plan = ChaosPlan(jobs=JOBS, long_share=0.1, long_ms=(100.0, 300.0))
    (tmp_path / "evidence").mkdir()
    fleet = Fleet(own_redis.url, tmp_path, tmp_path / "evidence", ["-c", "5", "-t", "20"],
                  env=STABLE_HEARTBEAT)
    evidence = Evidence(tmp_path / "evidence")
    admin = own_redis.client(socket_timeout=5)
    stops = RollingStops(fleet, admin, rng)
    client = Client(Config(redis_url=own_redis.url))

    def push(count: int) -> list[str]:
        return client.push_bulk("chaos_jobs.Work", [[job_ms(plan, rng)] for _ in range(count)])

    try:
        for _ in range(3):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        jids = push(JOBS)
        deadline = time.monotonic() + 200  # the pace of the jobs is the machine's
        next_cycle = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            finished = len(jids) - len(evidence.poll().lost(jids))
            now = time.monotonic()
            if finished == len(jids) and stops.cycles < MIN_CYCLES:
                # Worker starts are slow on a loaded machine, or the jobs quick on an idle
                # one: more jobs, so that every cycle counted stops a worker at work.
                jids += push(REFILL)
            elif finished < len(jids) and now >= next_cycle:
                stops.cycle(now)
                next_cycle = time.monotonic() + rng.uniform(0.4, 0.8)
            stops.advance(now)
            assert fleet.reap_exited() == [], "a worker exited on its own"
            if finished == len(jids) and not stops.stopping and stops.cycles >= MIN_CYCLES:
                break
            time.sleep(0.02)
        wait_for(lambda: not admin.exists("queue:default"), 60, fail=False)
        stops.exit_codes += fleet.stop_all(timeout=60)
        check(evidence.poll(), jids, stops, fleet, admin, say)
    finally:
        stops.give_back()
        fleet.kill_all()
        admin.close()


def check(evidence: Evidence, jids: list[str], stops: RollingStops, fleet: Fleet,
          admin: redis.Redis, say: Callable[[str], None]) -> None:
    """The guarantees of graceful stops, from the jobs' evidence and the workers' logs."""
    logs = fleet.logs()
    pushed_back = logs.count("not started (quiet)") + logs.count("unfinished job")
    reaped = fleet.reaped()
    say(
        f"{len(jids)} jobs; {stops.cycles} cycles: {stops.quieted} TSTP, {stops.terminated} "
        f"TERM; lost {len(evidence.lost(jids))}, duplicates {evidence.duplicates()}, "
        f"re-runs {evidence.reruns()}; quiet/stop push-backs logged: {pushed_back}; "
        f"reaps (pid: time, jobs pushed back) {reaped}; exit codes {stops.exit_codes}"
    )
    assert evidence.lost(jids) == []
    assert evidence.duplicates() == 0
    assert evidence.reruns() == 0
    assert stops.cycles >= MIN_CYCLES
    assert stops.exit_codes == [0] * len(stops.exit_codes)
    assert len(stops.exit_codes) == stops.terminated + 3
    assert leftovers(admin) == {}
    assert {pid: jobs for pid, (_, jobs) in reaped.items() if jobs} == {}, (
        "a reap pushed jobs back: a stopped worker left jobs in its private lists, or a "
        "live one was taken for dead"
    )


def test_clean_stop_unregisters_the_process_even_with_a_beat_in_flight(
    own_redis: RedisServer,
) -> None:
    """Deterministic form of a race seen in the chaos runs (a cleanly stopped worker left in
    ``processes`` and ``rfetch:identities`` by a beat that landed after ``clear()``): the
    heartbeat thread is held inside a beat, before its writes, while the process stops, and
    let go once ``clear()`` has run, or after 2 s when ``clear()`` waits for the beat (as
    it must)."""
    config = Config(
        redis_url=own_redis.url, heartbeat_interval=0.05, heartbeat_ttl=30, block_timeout=0.3
    )
    launcher = Launcher(config, Registry([]))
    heartbeat, work = launcher.heartbeat, launcher.work
    real_beat, real_clear, real_snapshot = heartbeat.beat, heartbeat.clear, work.snapshot
    armed, in_beat, cleared, beat_done = (threading.Event() for _ in range(4))

    def snapshot() -> Any:  # what a beat reads first, before its writes
        if threading.current_thread() is not threading.main_thread() and armed.is_set():
            armed.clear()
            in_beat.set()
            cleared.wait(2.0)
        return real_snapshot()

    def beat() -> None:
        held = in_beat.is_set()
        real_beat()
        if in_beat.is_set() and not held:
            beat_done.set()

    def clear() -> None:
        real_clear()
        cleared.set()

    def stop_during_a_beat() -> None:
        armed.set()
        in_beat.wait(60.0)  # a loaded machine may be slow to beat; TERM goes in any case
        launcher.events.put("TERM")

    heartbeat.beat, heartbeat.clear, work.snapshot = beat, clear, snapshot  # type: ignore[method-assign]
    saved = {name: signal.getsignal(getattr(signal, f"SIG{name}")) for name in HANDLED_SIGNALS}
    admin = own_redis.client(socket_timeout=5)
    try:
        threading.Timer(0.3, stop_during_a_beat).start()
        assert launcher.run() == 0
        assert in_beat.is_set(), "no beat was held: the heartbeat no longer reads work.snapshot"
        assert beat_done.wait(5.0), "the held beat never finished"
        assert registry_leftovers(admin) == []
        assert not admin.exists(launcher.identity)
    finally:
        for name, handler in saved.items():
            signal.signal(getattr(signal, f"SIG{name}"), handler)
        admin.close()
