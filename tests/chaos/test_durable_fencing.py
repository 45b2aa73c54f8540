"""Durable jobs against real process faults (slow tier):

- fencing: a worker running an iterable job is SIGSTOPped past its heartbeat TTL, another
  worker recovers and resumes the job, the first is SIGCONTed: its next checkpoint is
  refused (``checkpoint.lua``), it stops without starting another item, and the saved
  cursor never moves backwards;
- durable steps: a 5-step job whose worker is killed with -9 right after each step in turn
  (a new worker each time): every step's side effect happened exactly once.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

import rfetch
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, JOBS_DIR, WorkerProcess

pytestmark = pytest.mark.slow

ENV = {**FAST_ENV, "RFETCH_POISON_MAX_RECOVERIES": "20"}


@pytest.fixture(autouse=True)
def _jobs_on_path(monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer) -> None:
    monkeypatch.syspath_prepend(str(JOBS_DIR))
    monkeypatch.setenv("REDIS_URL", redis_server.url)


def _push(url: str, name: str, *args: object) -> str:
    import durable_jobs

    client = rfetch.Client(rfetch.Config(redis_url=url))
    jid = getattr(durable_jobs, name).set(client=client).perform_async(*args)
    assert jid is not None
    return jid


def _worker(url: str, tmp_path: Path) -> WorkerProcess:
    return WorkerProcess(url, ["-r", "durable_jobs", "-c", "2"], env=ENV, log_dir=tmp_path)


def test_a_stalled_worker_cannot_checkpoint_over_the_new_owner(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, say: Callable[[str], None]
) -> None:
    cursors: list[int] = []

    def cursor_seen() -> int | None:
        raw = r.hget(f"it-{jid}", "c")
        if raw is not None and json.loads(raw) is not None:
            cursors.append(int(json.loads(raw)))
            return cursors[-1]
        return None

    first = _worker(redis_server.url, tmp_path)
    second: WorkerProcess | None = None
    jid = _push(redis_server.url, "FenceWalk", 3000, 0.01)
    try:
        wait_for(lambda: (cursor_seen() or 0) >= 50, 60, first.log)
        first.signal(signal.SIGSTOP)
        stopped_cursor = cursors[-1]
        second = _worker(redis_server.url, tmp_path)
        # The second worker recovers the job and goes well past where the first stopped.
        wait_for(lambda: (cursor_seen() or 0) >= stopped_cursor + 100, 90, second.log)
        woke_at = r.llen(f"runs:{jid}")
        first.signal(signal.SIGCONT)
        wait_for(lambda: "refused" in first.log(), 30, first.log)
        wait_for(lambda: r.get(f"complete:{jid}") == b"1", 120, second.log)
        wait_for(lambda: cursor_seen() is None and not r.exists(f"it-{jid}"), 30, second.log)
        runs = [line.decode().split() for line in r.lrange(f"runs:{jid}", 0, -1)]
    finally:
        first.signal(signal.SIGCONT)
        first.stop()
        if second is not None:
            second.stop()
    after_wake = [item for pid, item in runs[woke_at:] if int(pid) == first.pid]
    say(f"cursor at SIGSTOP {stopped_cursor}; items the first worker started after "
        f"SIGCONT: {after_wake}; checkpoints seen {len(cursors)}")
    # At most the item it was in when stopped; never a new one.
    assert len(after_wake) <= 1
    assert cursors == sorted(cursors), "the saved cursor moved backwards"
    counts = {int(k): int(v) for k, v in r.hgetall(f"walk:{jid}").items()}
    assert set(counts) == set(range(3000))


def test_a_five_step_job_killed_after_each_step_runs_each_step_once(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, say: Callable[[str], None]
) -> None:
    jid = _push(redis_server.url, "FiveSteps", 1.5)
    kills = 0
    worker = _worker(redis_server.url, tmp_path)
    try:
        for step in range(1, 6):
            wait_for(lambda s=step: r.get(f"after:{jid}") == str(s).encode(), 60,  # type: ignore[misc]
                     worker.log)
            worker.kill()
            worker.wait(10)
            kills += 1
            worker = _worker(redis_server.url, tmp_path)
        wait_for(lambda: r.get(f"sum:{jid}") is not None, 90, worker.log)
    finally:
        worker.stop()
    counts = [int(r.get(f"step:{jid}:{i}") or 0) for i in range(1, 6)]
    say(f"{kills} kill -9; side effects per step: {counts}")
    assert counts == [1, 1, 1, 1, 1]
    assert r.get(f"sum:{jid}") == b"150"
