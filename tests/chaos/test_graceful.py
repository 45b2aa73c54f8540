"""Chaos, graceful shutdown only: TSTP/TERM cycles while jobs run, no kills.

Workers are quieted (TSTP) and then stopped (TERM), or stopped straight away, one after the
other while a replacement starts each time, as a rolling deploy does. Quiet pushes back the
jobs fetched but not started; TERM waits for the running ones (all shorter than ``-t``).
Nothing may be lost and nothing may run twice, counted from the jobs' own evidence.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rfetch.client import Client
from rfetch.config import Config
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
TERM_SENT = float("inf")


def test_tstp_and_term_cycles_lose_nothing_and_run_nothing_twice(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    rng = random.Random(2)
    plan = ChaosPlan(jobs=JOBS, long_share=0.1, long_ms=(100.0, 300.0))
    evidence_dir = tmp_path / "evidence"
    evidence_dir.mkdir()
    fleet = Fleet(own_redis.url, tmp_path, evidence_dir, ["-c", "5", "-t", "5"])
    evidence = Evidence(evidence_dir)
    admin = own_redis.client(socket_timeout=5)
    stopping: list[tuple[WorkerProcess, float]] = []
    exit_codes: list[int | None] = []
    quieted = terminated = 0
    try:
        for _ in range(3):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        client = Client(Config(redis_url=own_redis.url))
        jids = client.push_bulk("chaos_jobs.Work", [[job_ms(plan, rng)] for _ in range(JOBS)])
        deadline = time.monotonic() + 90
        next_cycle = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            evidence.poll()
            finished = len(jids) - len(evidence.lost(jids))
            now = time.monotonic()
            if finished < JOBS and now >= next_cycle:
                victim = rng.choice(fleet.live)
                fleet.live.remove(victim)
                if rng.random() < 0.6:
                    victim.signal(signal.SIGTSTP)  # quiet now, stop a little later
                    stopping.append((victim, now + rng.uniform(0.3, 0.8)))
                    quieted += 1
                else:
                    stopping.append((victim, now))
                # Up before it may be stopped: a TERM before the worker has installed its
                # handlers (during its imports) kills it outright, as it would any program.
                fleet.start().identity(admin)
                next_cycle = time.monotonic() + rng.uniform(0.4, 0.8)
            for index, (proc, term_at) in enumerate(stopping):
                if now >= term_at:
                    proc.signal(signal.SIGTERM)
                    terminated += 1
                    stopping[index] = (proc, TERM_SENT)
            for proc, term_at in list(stopping):
                if term_at == TERM_SENT and proc.proc.poll() is not None:
                    exit_codes.append(proc.wait(1))
                    fleet.gone.append(proc)
                    stopping.remove((proc, term_at))
            assert fleet.reap_exited() == [], "a worker exited on its own"
            if finished == JOBS and not stopping:
                break
            time.sleep(0.02)
        wait_for(lambda: not admin.exists("queue:default"), 10, fail=False)
        exit_codes += fleet.stop_all()
        evidence.poll()
        logs = fleet.logs()
        pushed_back = logs.count("not started (quiet)") + logs.count("unfinished job")
        say(
            f"{JOBS} jobs; {quieted} TSTP, {terminated} TERM during the run; "
            f"lost {len(evidence.lost(jids))}, duplicates {evidence.duplicates()}, "
            f"re-runs {evidence.reruns()}; quiet/stop push-backs logged: {pushed_back}; "
            f"exit codes {exit_codes}"
        )

        assert evidence.lost(jids) == []
        assert evidence.duplicates() == 0
        assert evidence.reruns() == 0
        assert terminated >= 5
        assert exit_codes == [0] * len(exit_codes)
        assert len(exit_codes) == terminated + 3
        assert leftovers(admin) == {}
        assert "reaped dead process" not in logs
    finally:
        for proc, _ in stopping:
            fleet.live.append(proc)
        fleet.kill_all()
        admin.close()


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
    real_beat, real_clear, real_running = heartbeat.beat, heartbeat.clear, work.running
    armed, in_beat, cleared, beat_done = (threading.Event() for _ in range(4))

    def running() -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread() and armed.is_set():
            armed.clear()
            in_beat.set()
            cleared.wait(2.0)
        return real_running()

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
        if in_beat.wait(5.0):
            launcher.events.put("TERM")

    heartbeat.beat, heartbeat.clear, work.running = beat, clear, running  # type: ignore[method-assign]
    saved = {name: signal.getsignal(getattr(signal, f"SIG{name}")) for name in HANDLED_SIGNALS}
    admin = own_redis.client(socket_timeout=5)
    try:
        threading.Timer(0.3, stop_during_a_beat).start()
        assert launcher.run() == 0
        assert beat_done.wait(5.0), "the held beat never finished"
        assert registry_leftovers(admin) == []
        assert not admin.exists(launcher.identity)
    finally:
        for name, handler in saved.items():
            signal.signal(getattr(signal, f"SIG{name}"), handler)
        admin.close()
