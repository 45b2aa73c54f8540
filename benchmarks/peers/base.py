"""What every framework adapter provides, and the client-side driver they share.

An adapter module ``benchmarks/peers/<name>.py`` defines ``PEERS`` (one or more
:class:`Peer`: how to start its worker) and, for the client side, a :class:`BenchClient`
subclass with ``bulk`` (the framework's bulk API) and ``push`` (one job). The harness runs
the client side as ``<peers python> -m benchmarks.peers.<name> ...`` so each framework is
imported only in its own process, never in the harness; the client prints one result
line (``BENCH-RESULT {json}``).

Jobs (in ``benchmarks/peers/<name>_jobs.py``, or ``benchmarks/bench_jobs.py`` for rfetch,
or ``sidekiq_jobs.rb``) come in three kinds, the same for every framework:

* ``noop``: INCR ``bench:done`` (so completion is counted the same way for everyone);
* ``sleep``: sleep 1 ms (simulated I/O), then INCR ``bench:done``;
* ``stamp``: RPUSH ``bench:started`` with the wall-clock time (float epoch seconds) at
  which the job started, for the enqueue -> start latency.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DONE = "bench:done"
STARTED = "bench:started"
KINDS = ("noop", "sleep", "stamp", "cpu", "io", "hash", "wait100", "wait100-thread",
         "wait100-only")
"""``cpu`` (5 ms of pure Python, ``benchmarks/swarm.py``), ``io`` and ``hash``
(``benchmarks/affinity.py``) and ``wait100`` / ``wait100-thread`` / ``wait100-only``
(``benchmarks/async_sleep.py``) exist for rfetch (``wait100`` for arq too)."""
RESULT_PREFIX = "BENCH-RESULT "
REPO = Path(__file__).resolve().parents[2]
NO_SPEEDUPS = Path(__file__).resolve().parent / "nospeedups"
"""Put first on PYTHONPATH, it hides hiredis (redis-py's C parser) and orjson: a framework
then runs as its plain ``pip install`` gets it, whatever else the peers' virtualenv holds."""


@dataclass(frozen=True)
class Runtime:
    """Where the frameworks live: the peers' virtualenv interpreter (or this one)."""

    python: str
    repo: Path = REPO

    def script(self, name: str) -> str:
        """A console script installed beside the interpreter."""
        return str(Path(self.python).parent / name)

    def env(self, url: str, concurrency: int, queues: Sequence[str]) -> dict[str, str]:
        """Environment of workers and clients: the Redis URL, the repo on PYTHONPATH (job
        modules are ``benchmarks.peers.*``), and the queues/concurrency for job modules
        that must declare them at import."""
        env = dict(os.environ)
        env.update(
            REDIS_URL=url,
            PYTHONPATH=str(self.repo),
            BENCH_QUEUES=",".join(queues),
            BENCH_CONCURRENCY=str(concurrency),
            PYTHONUNBUFFERED="1",
        )
        return env


class Peer:
    """How to run one framework's worker and client. Override what differs."""

    key = ""  # name for --only
    label = ""  # framework column; the installed version is appended
    fetch = ""  # fetch column
    package: str | None = None  # Python distribution whose version is shown
    module = ""  # benchmarks.peers.<name>, run for the client side
    multi_queue = True  # can one worker process listen to 20 queues?
    fixed_concurrency: int | None = None  # e.g. RQ: one job at a time per worker
    default = True  # run when --only is not given
    # hiredis and orjson hidden (NO_SPEEDUPS): True unless the framework's own plain install
    # brings them (arq requires redis[hiredis]) or the peer is a speedups variant.
    plain_install = True
    per_job_lines = ""  # what the worker logs per job at its default level ("" = nothing)

    def version(self, rt: Runtime) -> str | None:
        """The installed version, or None when the framework is missing."""
        if self.package is None:
            return None
        code = (
            "import importlib.metadata as m, sys\n"
            f"try: print(m.version({self.package!r}))\n"
            "except m.PackageNotFoundError: sys.exit(1)\n"
        )
        out = subprocess.run([rt.python, "-c", code], capture_output=True, text=True, timeout=60)
        return out.stdout.strip() if out.returncode == 0 else None

    def concurrency(self, wanted: int) -> int:
        return self.fixed_concurrency or wanted

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        raise NotImplementedError

    def logging_args(self, quiet: bool) -> list[str]:
        """Worker arguments for its logging: ``quiet`` turns its per-job lines off (the
        framework's other lines stay), else the framework's default. Job modules that set
        their logging at import (Sidekiq's) read ``BENCH_QUIET=1`` from the environment."""
        return []

    def worker_env(self, rt: Runtime, url: str, concurrency: int,
                   queues: Sequence[str]) -> dict[str, str]:
        env = rt.env(url, concurrency, queues)
        if self.plain_install:
            env["PYTHONPATH"] = f"{NO_SPEEDUPS}:{env['PYTHONPATH']}"
        return env

    def client_argv(self, rt: Runtime, args: Sequence[str]) -> list[str]:
        return [rt.python, "-m", self.module, *args]


class BenchClient:
    """The client side of one framework, built inside the peers' interpreter."""

    def __init__(self, url: str) -> None:
        self.url = url

    def bulk(self, kind: str, n: int, queue: str) -> None:
        """Enqueue ``n`` jobs of ``kind`` (args ``[i]``) with the framework's bulk API."""
        raise NotImplementedError

    def push(self, kind: str, i: int, queue: str) -> None:
        """Enqueue one job of ``kind`` with args ``[i]``."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections (e.g. an event loop)."""


def emit(result: dict[str, Any]) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def measure_latency(client: BenchClient, count: int, warmup: int, queue: str,
                    timeout: float, gaps: tuple[float, float] = (0.1, 0.6)) -> list[float]:
    """Push one ``stamp`` job at a time into an idle worker; for each, the job's start time
    (recorded by the job) minus the client's time just before the push, in seconds.

    Before each push the client sleeps a random gap between ``gaps`` (min, max) seconds so
    that the worker is idle (blocked, or between polls, or settled into its idle state)
    when the next job arrives, at a random phase of any poll loop.

    Raises:
        TimeoutError: a job did not start within ``timeout`` seconds.
    """
    import redis

    r = redis.Redis.from_url(client.url)
    latencies = []
    for i in range(warmup + count):
        time.sleep(random.uniform(*gaps))
        pushed = time.time()
        client.push("stamp", i, queue)
        got = r.blpop([STARTED], timeout=timeout)
        if got is None:
            raise TimeoutError(f"job {i} did not start within {timeout} s")
        if i >= warmup:
            latencies.append(float(got[1]) - pushed)
    r.close()
    return latencies


def client_main(factory: Callable[[str], BenchClient]) -> None:
    """Command line of an adapter's client side::

        fill KIND N [--queue Q]          enqueue N jobs with the bulk API; prints seconds
        latency COUNT [--warmup W] [--queue Q] [--timeout S] [--gap-min S] [--gap-max S]
                                          prints the enqueue -> start latencies (seconds)
    """
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="action", required=True)
    fill = sub.add_parser("fill")
    fill.add_argument("kind", choices=KINDS)
    fill.add_argument("n", type=int)
    fill.add_argument("--queue", default="default")
    lat = sub.add_parser("latency")
    lat.add_argument("count", type=int)
    lat.add_argument("--warmup", type=int, default=10)
    lat.add_argument("--queue", default="default")
    lat.add_argument("--timeout", type=float, default=30.0)
    lat.add_argument("--gap-min", type=float, default=0.1)
    lat.add_argument("--gap-max", type=float, default=0.6)
    args = parser.parse_args()
    client = factory(os.environ["REDIS_URL"])
    try:
        if args.action == "fill":
            started = time.perf_counter()
            client.bulk(args.kind, args.n, args.queue)
            emit({"seconds": time.perf_counter() - started})
        else:
            emit({"latencies": measure_latency(client, args.count, args.warmup, args.queue,
                                               args.timeout, (args.gap_min, args.gap_max))})
    finally:
        client.close()
    sys.stdout.flush()


def queues_from_env() -> list[str]:
    """Queues a worker listens to, for job modules that must declare them at import."""
    return [q for q in os.environ.get("BENCH_QUEUES", "default").split(",") if q]
