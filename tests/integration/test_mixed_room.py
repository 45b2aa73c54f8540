"""A mixed sync/async queue with real ``rfetch worker -c 2 --async-concurrency 6``
processes: a kind of room that sits idle is not starved by the other kind's jobs
(rfetch.worker.fetch_room: the probe for async jobs, and async jobs waiting for a slot
leaving the threads' room within the bound ``concurrency + prefetch + async_concurrency``).

Jobs are ``Gated`` (``tests/jobs``): each holds its thread or loop slot until its gate file
exists, so what starts while the others run is read with no timing.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.store.keys import Keys
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess

THREADS = 2
SLOTS = 6
BOUND = THREADS + THREADS + SLOTS
"""``concurrency + prefetch + async_concurrency`` (prefetch defaults to concurrency)."""

HORIZON = 0.1
"""The default ``prefetch_horizon``, seconds."""


class Run:
    """One worker and its record of job starts (``start <jid> <pid> <epoch>``)."""

    def __init__(self, url: str, r: redis.Redis, tmp_path: Path) -> None:
        self.r = r
        self.record = tmp_path / "record.txt"
        self.record.touch()
        self.jobs = Client(Config(redis_url=url), r)
        self.worker = WorkerProcess(
            url,
            ["-r", "testjobs", "-r", "async_jobs", "-c", str(THREADS),
             "--async-concurrency", str(SLOTS)],
            env={**FAST_ENV, "RFETCH_TEST_RECORD": str(self.record)},
            log_dir=tmp_path,
        )
        self.identity = self.worker.identity(r)

    def push(self, cls: str, gate: Path, count: int) -> list[str]:
        """Push ``count`` jobs in order (the first is fetched first); their jids."""
        return [self.jobs.push(cls, [str(gate)]) for _ in range(count)]

    def started(self, jids: list[str]) -> dict[str, float]:
        """Epoch start time of each of ``jids`` that started."""
        wanted = set(jids)
        found: dict[str, float] = {}
        for line in self.record.read_text().splitlines():
            event, jid, _, stamp = line.split()[:4]
            if event == "start" and jid in wanted:
                found[jid] = float(stamp)
        return found

    def wait_started(self, jids: list[str], what: str) -> dict[str, float]:
        wait_for(lambda: len(self.started(jids)) == len(jids), 60,
                 lambda: f"{what}: {len(self.started(jids))} of {len(jids)} started, queue "
                 f"{self.r.llen('queue:default')}, held {self.held()}\n{self.worker.log()}")
        return self.started(jids)

    def held(self) -> int:
        return int(self.r.llen(Keys().private(self.identity, "default")))


@contextmanager
def _run(url: str, r: redis.Redis, tmp_path: Path, gates: list[Path]) -> Iterator[Run]:
    run = Run(url, r, tmp_path)
    try:
        yield run
        for gate in gates:
            gate.touch()
        wait_for(lambda: r.llen("queue:default") == 0 and run.held() == 0, 60,
                 lambda: f"every job done:\n{run.worker.log()}")
        run.worker.signal(signal.SIGTERM)
        assert run.worker.wait(30) == 0
    finally:
        for gate in gates:
            gate.touch()
        if run.worker.proc.poll() is None:
            run.worker.kill()


def test_async_jobs_reach_an_idle_loop_while_every_thread_runs_a_long_sync_job(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """Both threads busy, only sync jobs fetched so far (share 0): the loop's slots did
    not count, so 10 queued async jobs waited for a thread to free while the loop idled."""
    threads_gate, loop_gate = tmp_path / "threads", tmp_path / "loop"
    with _run(redis_server.url, r, tmp_path, [loop_gate, threads_gate]) as run:
        started = run.wait_started(run.push("testjobs.Gated", threads_gate, THREADS),
                                   "both threads busy")
        # No thread is "ready soon" (the prefetch allowance is 0) once its job is older
        # than the horizon: the fetcher then has no thread room at all.
        wait_for(lambda: time.time() > max(started.values()) + 3 * HORIZON, 10, "old jobs")
        looped = run.push("async_jobs.Gated", loop_gate, 10)
        run.wait_started(looped[:SLOTS], "every loop slot busy")
        assert not run.started(looped[SLOTS:])
        assert run.held() <= BOUND
        assert "done" not in run.record.read_text()  # the sync jobs still hold the threads


def test_sync_jobs_behind_async_jobs_waiting_for_a_slot_start_on_idle_threads(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """Loop full, two async jobs at the head of the queue and two sync jobs behind them:
    once the threads' recent jobs were long (prefetch allowance 0), the async jobs waiting
    for a slot took the threads' room, and the sync jobs did not start on the idle threads
    until a slot freed."""
    loop_gate, threads_gate = tmp_path / "loop", tmp_path / "threads"
    with _run(redis_server.url, r, tmp_path, [loop_gate, threads_gate]) as run:
        # One sync job of 1 s: the mean run time makes the allowance of 2 idle threads
        # floor(2 x 0.1 / 1) = 0 (no job is fetched ahead of them).
        slow = run.jobs.push("testjobs.Sleep", [1.0])
        run.wait_started([slow], "the 1 s job")
        wait_for(lambda: f"done {slow}" in run.record.read_text(), 60, "the 1 s job's end")
        run.wait_started(run.push("async_jobs.Gated", loop_gate, SLOTS), "the loop full")
        ahead = run.push("async_jobs.Gated", loop_gate, 2)
        behind = run.push("testjobs.Gated", threads_gate, THREADS)
        run.wait_started(behind, "the sync jobs behind async jobs waiting for a slot")
        assert not run.started(ahead)  # still waiting for a slot
        assert run.held() <= BOUND
