"""Throughput of jobs under a fetch cap (``concurrency_key`` + ``concurrency_limit``) against
plain jobs, in one run: no-op jobs drained by one ``rfetch worker -c 10`` process. Starts
its own redis-server; every figure comes from the evidence lines the jobs write
(``tests/jobs/chaos_jobs.py``), not from Redis.

    python -m benchmarks.concurrency_cap                       # 20,000 jobs, 100 keys, limit 2
    python -m benchmarks.concurrency_cap --jobs 5000 --runs 3  # a quicker look, median of 3

Modes: ``plain`` (no option), ``capped`` (job i has key ``k<i % keys>`` and the limit).
Goal: capped >= 0.7 x plain. With ``--runs N`` the modes are interleaved (plain, capped,
plain, ...) and the median of each is reported. Drain rate = (done - 1) / (last done -
first done), so the worker's start-up is not counted. The worker processes import rfetch
from this checkout (its folder goes first on their PYTHONPATH), so a copy of an older
commit measures that commit's code: the plain figure before and after a change, in the
same sitting.
Only processes this script started are signalled, by their own PID.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO
from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.redis_server import RedisServer
from tests.support.workers import FAST_ENV, JOBS_DIR, WorkerProcess


def done_times(directory: Path) -> list[float]:
    """Times of every ``done`` evidence line, sorted."""
    found = []
    for path in directory.glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split(" ")
            if len(parts) >= 4 and parts[0] == "done":
                found.append(float(parts[3]))
    return sorted(found)


def drain_rate(server: RedisServer, base: Path, mode: str, jobs: int, keys: int, limit: int
               ) -> float:
    """Jobs per second of one drain of ``jobs`` no-op jobs of ``mode``."""
    server.client().flushall()
    evidence = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=base))
    client = Client(Config(redis_url=server.url))
    if mode == "plain":
        client.push_bulk("chaos_jobs.Tick", [[i] for i in range(jobs)])
    else:
        client.push_bulk(
            "chaos_jobs.Tick", [[i] for i in range(jobs)], {},
            options_for=lambda args: {"concurrency_key": f"k{args[0] % keys}",
                                      "concurrency_limit": limit},
        )
    proc = WorkerProcess(
        server.url,
        ["-r", "chaos_jobs", "-c", "10"],
        env={**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence),
             "PYTHONPATH": os.pathsep.join([str(REPO), str(JOBS_DIR)])},
        log_dir=evidence,
    )
    deadline = time.monotonic() + 600
    try:
        while len(times := done_times(evidence)) < jobs and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        proc.signal(signal.SIGTERM)
        proc.wait(60)
    assert len(times) >= jobs, f"{mode}: only {len(times)} of {jobs} done"
    return (len(times) - 1) / (times[-1] - times[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--limit", type=int, default=2)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--modes", default="plain,capped")
    args = parser.parse_args()
    modes = args.modes.split(",")
    base = Path(tempfile.mkdtemp(prefix="rfetch-caps-"))
    server = RedisServer()
    server.start()
    print(f"redis-server {server.url}; rfetch from {REPO}; {args.jobs} no-op jobs, one worker "
          f"x 10 threads, {args.keys} keys, limit {args.limit}, median of {args.runs}")
    try:
        values: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(args.runs):  # interleaved, so a change in the machine's load hits both
            for mode in modes:
                values[mode].append(
                    drain_rate(server, base, mode, args.jobs, args.keys, args.limit))
        rates: dict[str, float] = {}
        for mode in modes:
            rates[mode] = statistics.median(values[mode])
            ratio = ""
            if "plain" in rates:
                ratio = f"  ratio to plain {rates[mode] / rates['plain']:.2f}"
            print(f"    {mode:8s} {rates[mode]:8.0f} jobs/s  (runs: "
                  f"{', '.join(f'{v:.0f}' for v in values[mode])}){ratio}", flush=True)
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
