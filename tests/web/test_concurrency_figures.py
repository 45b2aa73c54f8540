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

from rfetch.client import Client as JobClient
from rfetch.config import Config
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
        jobs = JobClient(Config(redis_url=redis_server.url), r)
        samples_seen: list[tuple[int, int, int]] = []

        def busy_is(wanted: int) -> bool:
            beat = _hash(r, identity)
            info = json.loads(beat["info"])
            busy = int(beat["busy"])
            samples_seen.append((busy, info["concurrency"], int(beat.get("concurrency", -1))))
            # At every sample, busy never exceeds the capacity Sidekiq Web divides it by.
            assert busy <= info["concurrency"], (busy, info, worker.log())
            return busy == wanted

        def busy(wanted: int) -> None:
            wait_for(lambda: busy_is(wanted), 60,
                     lambda: f"{wanted} busy: {samples_seen[-5:]}\n{worker.log()}")

        # Async jobs first, more than the threads, until the loop's slots are full; then the
        # sync ones for the threads; then async jobs that wait for a slot.
        for _ in range(SLOTS):
            jobs.push("async_jobs.Gated", [str(gate)])
        busy(SLOTS)
        for _ in range(THREADS):
            jobs.push("testjobs.Gated", [str(gate)])
        busy(THREADS + SLOTS)
        for _ in range(4):
            jobs.push("async_jobs.Gated", [str(gate)])
        last = float(_hash(r, identity)["beat"])
        wait_for(lambda: float(_hash(r, identity)["beat"]) > last and busy_is(THREADS + SLOTS),
                 30, "a beat after more async jobs came")
        beat = _hash(r, identity)
        info = json.loads(beat["info"])
        assert info["concurrency"] == THREADS + SLOTS
        assert int(beat["concurrency"]) == THREADS + SLOTS  # read by Sidekiq 8.1.2+
        assert {name: c["concurrency"] for name, c in info["capsules"].items()} == {
            "default": THREADS, "async": SLOTS}
        assert (int(beat["busy_threads"]), int(beat["busy_async"])) == (THREADS, SLOTS)
        assert r.hlen(f"{identity}:work") <= THREADS + SLOTS  # Sidekiq Web's "Busy"

        wait_for(lambda: _title(worker.pid) == (THREADS + SLOTS, THREADS + SLOTS), 30,
                 lambda: f"the title [8 of 8 busy]: {psutil.Process(worker.pid).cmdline()}")

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

        gate.touch()
        wait_for(lambda: r.llen("queue:default") == 0 and _hash(r, identity)["busy"] == "0",
                 60, lambda: f"every job done:\n{worker.log()}")
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    finally:
        gate.touch()
        if worker.proc.poll() is None:
            worker.kill()
