"""Periodic jobs with real ``rfetch worker`` processes: bad schedules stop the start, a
frozen leader whose lease was taken pushes no tick twice, and a stopped leader hands over.

Jobs and schedules come from ``tests/jobs/periodic_jobs.py`` (``-r periodic_jobs``), whose
server middleware appends ``tick <schedule> <tick> <jid> <pid> <time>`` after each periodic
job.
"""

from __future__ import annotations

import collections
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import WorkerProcess

LEADER_TTL = 3
ENV = {
    "RFETCH_LEADER_TTL": str(LEADER_TTL),
    "RFETCH_HEARTBEAT_INTERVAL": "1",
    "RFETCH_BLOCK_TIMEOUT": "1",
    "RFETCH_PREFETCH": "0",
}

StartPeriodic = Callable[..., WorkerProcess]


def leader_pid(r: redis.Redis) -> int | None:
    identity = r.hget("rfetch:leader", "identity")
    return int(identity.decode().split(":")[-2]) if identity else None


def jids_by_tick(path: Path) -> dict[int, set[str]]:
    seen: dict[int, set[str]] = collections.defaultdict(set)
    if path.exists():
        for line in path.read_text().splitlines():
            kind, _name, tick, jid, *_ = line.split()
            if kind == "tick":
                seen[int(tick)].add(jid)
    return seen


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    return WorkerDefaults(
        args=("-r", "periodic_jobs", "-q", "periodic", "-c", "2", "-t", "5"), env=ENV
    )


@pytest.fixture
def periodic_worker(start_worker: StartWorker) -> StartPeriodic:
    """Start a worker with the schedules of ``kind`` and a leader lease of ``leader_ttl`` s
    (it does not wait for the heartbeat: a bad schedule stops the start)."""

    def start(kind: str = "every-second", leader_ttl: int = LEADER_TTL) -> WorkerProcess:
        env = {"RFETCH_LEADER_TTL": str(leader_ttl), "RFETCH_TEST_PERIODIC": kind}
        return start_worker(env=env, ready=False)

    return start


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("bad-cron", "periodic schedule 'broken-cron': bad cron expression '61 * * * *'"),
        ("bad-tz", "periodic schedule 'broken-tz': unknown time zone 'Europe/Berln'"),
        ("unknown-job", "periodic schedule 'ghost': job 'NoSuchJob' is not registered"),
        ("bad-args", "periodic schedule 'broken-args': args[0] is a date"),
    ],
)
def test_a_bad_schedule_stops_the_worker_before_it_starts(
    r: redis.Redis, periodic_worker: StartPeriodic, kind: str, message: str
) -> None:
    worker = periodic_worker(kind)
    assert worker.wait(30) != 0
    assert message in worker.log()
    assert not r.exists("processes")
    assert not r.exists("rfetch:leader")
    assert not r.exists("rfetch:periodic")


def test_a_schedule_of_a_job_only_ruby_runs_starts_and_pushes_by_class_name(
    r: redis.Redis, periodic_worker: StartPeriodic
) -> None:
    """``external=True``: no job of that name in this worker, the start is not refused and
    each tick is pushed by class name to the schedule's queue, for a Ruby Sidekiq process
    (Sidekiq Enterprise's periodic jobs push a class name the same way)."""
    worker = periodic_worker("ruby-only")
    wait_for(lambda: r.llen("queue:ruby") >= 2, 30, "two ticks pushed to queue:ruby")
    payload = json.loads(r.lindex("queue:ruby", -1) or b"{}")
    assert payload["class"] == "RubyOnlyWorker"
    assert payload["args"] == ["nightly"]
    assert payload["periodic"] == "ruby-only"
    assert b"ruby" in r.smembers("queues")
    assert worker.proc.poll() is None


def test_a_frozen_leader_whose_lease_was_taken_pushes_no_tick_twice(
    r: redis.Redis, periodic_worker: StartPeriodic, tmp_path: Path
) -> None:
    """SIGSTOP freezes the leader past its lease; another worker is elected and catches up;
    SIGCONT wakes the old leader in the middle of whatever it was doing, with its old token:
    no tick is pushed twice, none in between is missing."""
    a = periodic_worker()
    wait_for(lambda: leader_pid(r) == a.pid, 30, "the first worker to lead")
    b = periodic_worker()
    wait_for(lambda: r.scard("processes") == 2, 30, "the second worker's heartbeat")
    first = int(r.hget("rfetch:periodic:every-second", "cursor") or 0)
    wait_for(lambda: len(jids_by_tick(tmp_path / "record.txt")) >= 2, 30, "ticks to run")
    a.signal(signal.SIGSTOP)
    wait_for(lambda: leader_pid(r) == b.pid, 4 * LEADER_TTL, "the second worker to lead")
    time.sleep(2)
    a.signal(signal.SIGCONT)
    time.sleep(2 * LEADER_TTL)
    assert leader_pid(r) == b.pid
    last = int(r.hget("rfetch:periodic:every-second", "cursor") or 0)
    wait_for(
        lambda: all(t in jids_by_tick(tmp_path / "record.txt") for t in range(first + 1, last)),
        30, "every tick's job to run",
    )
    seen = jids_by_tick(tmp_path / "record.txt")
    assert [t for t in range(first + 1, last) if t not in seen] == []
    assert {t: j for t, j in seen.items() if len(j) > 1} == {}


def test_a_stopped_leader_hands_over_at_once(
    r: redis.Redis, periodic_worker: StartPeriodic
) -> None:
    """With a 60 s lease, only the step-down can move the leadership within 10 s."""
    a = periodic_worker(leader_ttl=60)
    wait_for(lambda: leader_pid(r) == a.pid, 30, "the first worker to lead")
    b = periodic_worker(leader_ttl=60)
    wait_for(lambda: r.scard("processes") == 2, 30, "the second worker's heartbeat")
    time.sleep(1)  # b is now waiting as a follower
    changes = int(r.get("rfetch:leader-changes") or 0)
    a.signal(signal.SIGTERM)
    wait_for(lambda: leader_pid(r) == b.pid, 10, "the follower to take over")
    assert a.wait(30) == 0
    assert int(r.get("rfetch:leader-changes") or 0) == changes + 1
    assert "stepped down as leader" in a.log()
