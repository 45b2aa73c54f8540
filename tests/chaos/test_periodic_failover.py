"""Periodic jobs through leader failover, with real ``rfetch worker`` processes.

Three workers run a per-second schedule for 60 s. The leader is SIGKILLed at about 20 s and
40 s (a supervisor starts a replacement each time, so three workers stay up), and the next
leader is quieted (TSTP) at about 50 s, then stopped (TERM). The evidence is the file the
periodic jobs append to (``tests/jobs/periodic_jobs.py``): every tick of the window must be
pushed exactly once (one jid per tick, none missing), and the leadership must move within
3 s of the graceful step-down. The lease is shortened to 6 s so that three failovers fit in
a minute (the default is 15 s); the catch-up window is then 24 s.
"""

from __future__ import annotations

import collections
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.slow

LEADER_TTL = 6
WINDOW = 60
ENV = {
    "RFETCH_LEADER_TTL": str(LEADER_TTL),
    "RFETCH_HEARTBEAT_INTERVAL": "1",
    "RFETCH_HEARTBEAT_TTL": "5",
    "RFETCH_ORPHAN_CHECK_INTERVAL": "2",
    "RFETCH_POLL_INTERVAL_AVERAGE": "1",
    "RFETCH_POLL_INITIAL_WAIT": "1",
    "RFETCH_BLOCK_TIMEOUT": "1",
    "RFETCH_PREFETCH": "0",
    "RFETCH_TEST_PERIODIC": "every-second",
}


def redis_now(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1_000_000


def leader_pid(r: redis.Redis) -> int | None:
    identity = r.hget("rfetch:leader", "identity")
    return int(identity.decode().split(":")[-2]) if identity else None


def ticks(path: Path) -> dict[int, set[str]]:
    """Tick -> the jids that ran for it (a jid run twice is at-least-once execution after a
    SIGKILL, not a second push)."""
    seen: dict[int, set[str]] = collections.defaultdict(set)
    if path.exists():
        for line in path.read_text().splitlines():
            kind, _name, tick, jid, *_ = line.split()
            if kind == "tick":
                seen[int(tick)].add(jid)
    return seen


@pytest.fixture
def workers(redis_server: RedisServer, tmp_path: Path) -> Iterator[Callable[[], WorkerProcess]]:
    started: list[WorkerProcess] = []
    env = {**ENV, "RFETCH_TEST_RECORD": str(tmp_path / "record.txt")}

    def start() -> WorkerProcess:
        proc = WorkerProcess(
            redis_server.url, ["-r", "periodic_jobs", "-q", "periodic", "-c", "2", "-t", "5"],
            env=env, log_dir=tmp_path,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.proc.poll() is None:
            proc.kill()


def test_every_tick_once_through_two_kills_and_a_graceful_handover(
    r: redis.Redis,
    workers: Callable[[], WorkerProcess],
    tmp_path: Path,
    say: Callable[[str], None],
) -> None:
    procs = {p.pid: p for p in (workers() for _ in range(3))}
    wait_for(lambda: leader_pid(r) in procs, 30, "a leader")
    first = int(redis_now(r)) + 2
    last = first + WINDOW - 1
    failovers: list[tuple[str, float]] = []

    def hand_over(at: int, how: str) -> None:
        time.sleep(max(0.0, first + at - redis_now(r)))
        wait_for(lambda: leader_pid(r) in procs, 3 * LEADER_TTL, "a leader before acting")
        old = leader_pid(r)
        assert old is not None
        victim = procs[old]
        started = time.monotonic()
        if how == "SIGKILL":
            victim.kill()
            del procs[old]
            procs.update({p.pid: p for p in [workers()]})  # the supervisor's replacement
        else:
            victim.signal(signal.SIGTSTP)
        wait_for(
            lambda: leader_pid(r) not in (None, old), 3 * LEADER_TTL, f"a leader after {how}",
            step=0.02,
        )
        failovers.append((how, time.monotonic() - started))
        if how == "SIGTSTP":
            victim.signal(signal.SIGTERM)
            assert victim.wait(30) == 0
            del procs[old]

    hand_over(20, "SIGKILL")
    hand_over(40, "SIGKILL")
    hand_over(50, "SIGTSTP")
    time.sleep(max(0.0, last + 1 - redis_now(r)))
    record = tmp_path / "record.txt"
    window = range(first, last + 1)
    wait_for(lambda: all(t in ticks(record) for t in window), 60, "every tick's job to run")
    for proc in procs.values():
        proc.signal(signal.SIGTERM)
    for proc in procs.values():
        proc.wait(30)

    seen = ticks(record)
    missing = [t for t in window if t not in seen]
    doubled = {t: jids for t, jids in seen.items() if len(jids) > 1}
    lines = (tmp_path / "record.txt").read_text().splitlines()
    reruns = len(lines) - sum(len(j) for j in seen.values())
    say(
        f"ticks expected {len(window)}, pushed {sum(1 for t in window if t in seen)}, "
        f"duplicated {len(doubled)}, missing {len(missing)}; jobs re-run after a kill "
        f"{reruns}; failovers "
        + ", ".join(f"{how} {seconds:.2f} s" for how, seconds in failovers)
    )
    assert missing == []
    assert doubled == {}
    assert [how for how, _ in failovers] == ["SIGKILL", "SIGKILL", "SIGTSTP"]
    assert failovers[2][1] <= 3.0
    assert int(r.get("rfetch:leader-changes") or 0) >= 4
    assert int(r.hget("rfetch:periodic:every-second", "skipped") or 0) == 0
