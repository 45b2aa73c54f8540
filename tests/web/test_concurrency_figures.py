"""Concurrency figures that add up: a real worker ``-c 2 --async-concurrency 6`` running
more async jobs than it has threads publishes one capacity, threads plus loop slots,
wherever it is read: the heartbeat's ``concurrency`` and ``busy`` (what Sidekiq Web's Busy
page and its utilisation read: busy never exceeds concurrency), the process title's
``[x of y busy]``, the worker's Prometheus gauges, the cluster's ``/metrics`` and rfetch's
Busy page, which shows threads and async slots apart.

Jobs are ``Gated`` (``tests/jobs``): each holds its thread or slot until the gate file
exists, so the figures are read while every thread and slot is busy, with no timing.
"""

from __future__ import annotations

import json
import re
import signal
import urllib.request
from pathlib import Path

import psutil
import redis
from werkzeug.test import Client

from rfetch.config import Config
from rfetch.push.client import Client as JobClient
from tests.support.redis_server import RedisServer, free_port
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess
from tests.web.test_metrics import samples

THREADS = 2
SLOTS = 6


def _hash(r: redis.Redis, identity: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in r.hgetall(identity).items()}


def _title(pid: int) -> tuple[int, int] | None:
    """``(x, y)`` of the process title's ``[x of y busy]``, or None before it is set."""
    found = re.search(r"\[(\d+) of (\d+) busy\]", " ".join(psutil.Process(pid).cmdline()))
    return (int(found[1]), int(found[2])) if found else None


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        got = samples(answer.read().decode())
    return {name: value for (name, labels), value in got.items() if not labels}


class Beats:
    """Samples of one worker's heartbeat, each checked: busy never exceeds the capacity
    Sidekiq Web divides it by."""

    def __init__(self, r: redis.Redis, identity: str, worker: WorkerProcess) -> None:
        self.r = r
        self.identity = identity
        self.worker = worker
        self.seen: list[tuple[int, int]] = []

    def busy_is(self, wanted: int) -> bool:
        beat = _hash(self.r, self.identity)
        info = json.loads(beat["info"])
        busy = int(beat["busy"])
        self.seen.append((busy, info["concurrency"]))
        assert busy <= info["concurrency"], (busy, info, self.worker.log())
        return busy == wanted

    def wait(self, wanted: int) -> None:
        wait_for(lambda: self.busy_is(wanted), 60,
                 lambda: f"{wanted} busy: {self.seen[-5:]}\n{self.worker.log()}")

    def next_beat(self, wanted: int) -> None:
        last = float(_hash(self.r, self.identity)["beat"])
        wait_for(lambda: float(_hash(self.r, self.identity)["beat"]) > last
                 and self.busy_is(wanted), 30, "the next beat")


def _fill(jobs: JobClient, gate: Path, beats: Beats) -> None:
    """Async jobs first, more than the threads, until the loop's slots are full; then the
    sync ones for the threads; then async jobs that wait for a slot."""
    for _ in range(SLOTS):
        jobs.push("async_jobs.Gated", [str(gate)])
    beats.wait(SLOTS)
    for _ in range(THREADS):
        jobs.push("testjobs.Gated", [str(gate)])
    beats.wait(THREADS + SLOTS)
    for _ in range(4):
        jobs.push("async_jobs.Gated", [str(gate)])
    beats.next_beat(THREADS + SLOTS)


def _assert_heartbeat(r: redis.Redis, identity: str) -> None:
    beat = _hash(r, identity)
    info = json.loads(beat["info"])
    assert info["concurrency"] == THREADS + SLOTS
    assert int(beat["concurrency"]) == THREADS + SLOTS  # read by Sidekiq 8.1.2+
    assert {name: c["concurrency"] for name, c in info["capsules"].items()} == {
        "default": THREADS, "async": SLOTS}
    assert (int(beat["busy_threads"]), int(beat["busy_async"])) == (THREADS, SLOTS)
    assert r.hlen(f"{identity}:work") <= THREADS + SLOTS  # Sidekiq Web's "Busy"


def _assert_gauges_and_page(port: int, client: Client) -> None:
    gauges = _scrape(port)
    assert gauges["rfetch_worker_busy_threads"] == THREADS
    assert gauges["rfetch_worker_concurrency_threads"] == THREADS
    assert gauges["rfetch_worker_busy_async_slots"] == SLOTS
    assert gauges["rfetch_worker_concurrency_async_slots"] == SLOTS
    cluster = samples(client.get("/metrics").get_data(as_text=True))
    assert cluster[("rfetch_busy_threads", ())] == THREADS
    assert cluster[("rfetch_concurrency_threads", ())] == THREADS
    assert cluster[("rfetch_busy_async_slots", ())] == SLOTS
    assert cluster[("rfetch_concurrency_async_slots", ())] == SLOTS
    page = re.sub(r"\s+", " ", client.get("/busy").get_data(as_text=True))
    assert f"{THREADS} / {THREADS} threads" in page
    assert f"{SLOTS} / {SLOTS} async slots" in page


def test_threads_and_async_slots_add_up_everywhere(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, client: Client
) -> None:
    gate = tmp_path / "gate"
    port = free_port()
    worker = WorkerProcess(
        redis_server.url,
        ["-r", "testjobs", "-r", "async_jobs", "-c", str(THREADS),
         "--async-concurrency", str(SLOTS), "--metrics-port", str(port)],
        env={**FAST_ENV, "RFETCH_TEST_RECORD": str(tmp_path / "record.txt")},
        log_dir=tmp_path,
    )
    try:
        identity = worker.identity(r)
        _fill(JobClient(Config(redis_url=redis_server.url), r), gate, Beats(r, identity, worker))
        _assert_heartbeat(r, identity)
        wait_for(lambda: _title(worker.pid) == (THREADS + SLOTS, THREADS + SLOTS), 30,
                 lambda: f"the title [8 of 8 busy]: {psutil.Process(worker.pid).cmdline()}")
        _assert_gauges_and_page(port, client)
        gate.touch()
        wait_for(lambda: r.llen("queue:default") == 0 and _hash(r, identity)["busy"] == "0",
                 60, lambda: f"every job done:\n{worker.log()}")
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    finally:
        gate.touch()
        if worker.proc.poll() is None:
            worker.kill()
