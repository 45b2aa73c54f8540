"""Limiters across real worker processes (``rfetch worker``, jobs in
``tests/jobs/limiter_jobs.py``), judged from evidence the jobs write to a file outside Redis
with the host's one clock:

- a window limiter of 50/s called by 2,000 jobs on 4 processes x 10 threads: no aligned
  1-second window holds more than 50 calls;
- a concurrent limiter of 5 on 4 processes x 10 threads: never more than 5 blocks at once;
- a SIGKILLed holder's lock comes back after ``lock_timeout`` and not before;
- a job over the limit is rescheduled (retry_count unchanged), then fails after the maximum.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.errors import OverLimit
from rfetch.push.client import Client
from tests.support.limiter_evidence import max_overlap, window_counts
from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import FAST_ENV, WorkerProcess

pytestmark = pytest.mark.slow

Start = Callable[..., list[WorkerProcess]]


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    return WorkerDefaults(args=("-r", "limiter_jobs"), env=FAST_ENV)


@pytest.fixture
def start(r: redis.Redis, start_worker: StartWorker) -> Start:
    """Start ``n`` workers ``-c threads`` on the limiter jobs, wait for their heartbeats."""

    def run(n: int, threads: int) -> list[WorkerProcess]:
        batch = [start_worker("-c", str(threads), ready=False) for _ in range(n)]
        for worker in batch:
            worker.identity(r)
        return batch

    return run


def lines(record: Record, event: str) -> list[list[str]]:
    return [f for f in record.lines() if f[0] == event]


def test_window_of_50_per_second_holds_across_4_processes_x_10_threads(
    start: Start, redis_server: RedisServer, r: redis.Redis, record: Record,
    say: Callable[[str], None],
) -> None:
    workers = start(4, 10)
    client = Client(Config(redis_url=redis_server.url), r)
    client.push_bulk("limiter_jobs.WindowCall", [[i] for i in range(2000)])
    wait_for(lambda: len(lines(record, "call")) == 2000, 90, workers[0].log, step=0.5)

    calls = [(float(f[4]), float(f[3])) for f in lines(record, "call")]
    report = window_counts(calls)
    span = max(c[1] for c in calls) - min(c[1] for c in calls)
    full = sum(1 for n in report.definite.values() if n >= 45)
    say(f"2000 calls over {span:.1f} s in {len(report.definite)} windows; most in one window "
        f"{report.worst()}; windows with >= 45: {full}; crossing a boundary: "
        f"{report.straddling}; pids {len({f[2] for f in lines(record, 'call')})}")
    assert report.worst() <= 50, sorted(report.definite.items())
    assert report.straddling < 100  # the evidence pins almost every call to its window
    assert span >= 2000 / 50 - 2  # the limit bound the run
    assert full >= 20  # and the limit was reached, so the check above could fail
    assert len({f[2] for f in lines(record, "call")}) == 4
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0


def test_concurrent_limiter_of_5_across_4_processes_x_10_threads(
    start: Start, redis_server: RedisServer, r: redis.Redis, record: Record,
    say: Callable[[str], None],
) -> None:
    workers = start(4, 10)
    client = Client(Config(redis_url=redis_server.url), r)
    client.push_bulk("limiter_jobs.SlotHold", [[0.05] for _ in range(300)])
    wait_for(lambda: len(lines(record, "out")) == 300, 60, workers[0].log, step=0.5)

    opened = {f[1]: float(f[3]) for f in lines(record, "in")}
    closed = {f[1]: float(f[3]) for f in lines(record, "out")}
    most = max_overlap([(opened[j], closed[j]) for j in closed])
    say(f"300 blocks of 50 ms: at most {most} at once (limit 5)")
    assert most <= 5
    assert most == 5  # the limit was reached, so the check could fail
    assert not [f for f in r.hkeys("rfetch:limiter:mp-slots") if f.startswith(b"l:")]


def test_sigkilled_holder_s_lock_comes_back_after_lock_timeout_not_before(
    start: Start, redis_server: RedisServer, r: redis.Redis, record: Record,
    say: Callable[[str], None],
) -> None:
    [holder] = start(1, 2)
    client = Client(Config(redis_url=redis_server.url), r)
    probe = rfetch.Limiter.concurrent("mp-short", 1, lock_timeout=3, wait_timeout=0,
                                      client=client)
    client.push("limiter_jobs.HoldShortLock", [600])
    wait_for(lambda: bool(lines(record, "held")), 60, holder.log)
    time.sleep(4)  # past lock_timeout while the holder lives: it renewed
    with pytest.raises(OverLimit), probe.within_limit():
        pass

    holder.kill()
    killed = time.time()
    granted_at = None
    while time.time() - killed < 10:
        try:
            with probe.within_limit():
                granted_at = time.time()
                break
        except OverLimit:
            time.sleep(0.05)
    assert granted_at is not None
    after = granted_at - killed
    say(f"lock_timeout 3 s, renewed every 1 s: the killed holder's lock came back after "
        f"{after:.2f} s")
    # The last renewal was at most lock_timeout / 3 (plus a little load) before the kill.
    assert 3 - 1 - 0.5 <= after <= 3 + 1.0
    assert r.hget("rfetch:limiter:mp-short", "reclaimed") == b"1"


@pytest.mark.parametrize("job", ["limiter_jobs.OverFull", "limiter_jobs.AsyncOverFull"])
def test_over_limit_reschedules_then_fails_after_the_maximum(
    start: Start, redis_server: RedisServer, r: redis.Redis, record: Record, job: str,
) -> None:
    [worker] = start(1, 2)
    client = Client(Config(redis_url=redis_server.url), r)
    full = rfetch.Limiter.window("mp-full", 1, per="day", wait_timeout=0, client=client)
    with full.within_limit():
        pass
    jid = client.push(job, [])
    wait_for(lambda: r.zcard("retry") == 1, 30, worker.log, step=0.2)

    [raw] = r.zrange("retry", 0, -1)
    payload = json.loads(raw)
    assert payload["jid"] == jid and payload["overrated"] == 2 and payload["retry_count"] == 0
    assert payload["error_class"] == "rfetch.errors.OverLimit"
    assert len([f for f in lines(record, "try") if f[1] == jid]) == 3
    assert not lines(record, "ran")
    assert r.hget("rfetch:limiter:mp-full", "overlimit") == b"3"
    # Three executions, one failure: the reschedules were not failures.
    wait_for(lambda: int(r.get("stat:processed") or 0) == 3, 10, worker.log)
    assert int(r.get("stat:failed") or 0) == 1
