"""The transactional outbox's cost, measured in one sitting against PostgreSQL.

    python -m benchmarks.outbox [--latency-count 300] [--jobs 50000] [--database URL]

Needs a PostgreSQL where ``--database`` (default ``postgresql://postgres@127.0.0.1:5432/
postgres``) may create and drop a database of its own, and a redis-server (a private one
is started, no persistence).

* **Latency, commit -> job start**: one ``rfetch worker`` (``bench_jobs.Stamp``, which
  RPUSHes its start time) and one relay (``rfetch relay``, woken by LISTEN/NOTIFY) run;
  ``--latency-count`` times, a transaction inserts an order row and pushes the job through
  ``rfetch.outbox.using``, then commits; the latency is the job's start time minus the time
  just before the commit. Beside it, the same count of direct pushes (``perform_async``
  outside the outbox): start time minus the time just before the push. One job at a time
  (each waits for the previous start), alternating outbox and direct, so load on the
  machine falls on both alike.
* **Relay throughput**: ``--jobs`` rows are committed to the outbox (``perform_bulk``
  inside ``using``) with no relay running; then one relay (in this process, batches of
  1,000) moves them to Redis, timed until the queue holds them all; beside it, a direct
  ``push_bulk`` of the same jobs in calls of 1,000.

Prints p50/p90/p99 (ms) and jobs/s, with the outbox / direct ratios, and the load average.
"""

from __future__ import annotations

import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import click
import psycopg

import rfetch
from benchmarks.common import PrivateRedis, env_with, stop_group
from rfetch.config import Config
from rfetch.outbox.service import build_relay, migrate
from rfetch.push.client import Client

HERE = Path(__file__).resolve().parent


def _percentiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"p50 {q[49]:7.2f} ms  p90 {q[89]:7.2f} ms  p99 {q[98]:7.2f} ms"


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "rfetch.cli", *args], env=env, cwd=HERE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def latency(url: str, server: PrivateRedis, count: int) -> tuple[list[float], list[float]]:
    """(outbox, direct) latencies in ms, commit (or push) -> job start."""
    env = env_with(server.url, PYTHONPATH=str(HERE))
    worker = _start(["worker", "-r", "bench_jobs", "-c", "5"], env)
    relay = _start(["relay", "--database", url], env)
    client = Client(Config(redis_url=server.url))
    outbox: list[float] = []
    direct: list[float] = []
    try:
        with psycopg.connect(url) as conn:
            for i in range(-20, count):  # 20 warm-up rounds, not counted
                with rfetch.outbox.using(conn):
                    conn.execute("INSERT INTO orders (n) VALUES (%s)", (i,))
                    client.push("bench_jobs.Stamp", [i])
                    before = time.time()
                    conn.commit()
                started = server.client.blpop(["bench:started"], timeout=60)
                assert started is not None, "no job start within 60 s"
                if i >= 0:
                    outbox.append((float(started[1]) - before) * 1000)
                before = time.time()
                client.push("bench_jobs.Stamp", [i])
                started = server.client.blpop(["bench:started"], timeout=60)
                assert started is not None, "no job start within 60 s"
                if i >= 0:
                    direct.append((float(started[1]) - before) * 1000)
    finally:
        stop_group(worker)
        stop_group(relay)
    return outbox, direct


def throughput(url: str, server: PrivateRedis, jobs: int) -> tuple[float, float]:
    """(relay, direct push_bulk) jobs/s for ``jobs`` jobs."""
    client = Client(Config(redis_url=server.url))
    args = [[i] for i in range(jobs)]
    server.client.delete("queue:bench")
    with psycopg.connect(url) as conn, rfetch.outbox.using(conn):
        for start in range(0, jobs, 1000):
            client.push_bulk("bench_jobs.Nothing", args[start:start + 1000], {"queue": "bench"})
        conn.commit()
    relay = build_relay(Config(redis_url=server.url), url)
    stop = threading.Event()
    began = time.monotonic()
    thread = threading.Thread(target=relay.run, args=(stop,))
    thread.start()
    while server.client.llen("queue:bench") < jobs:
        time.sleep(0.002)
    relayed = time.monotonic() - began
    stop.set()
    thread.join(30)
    server.client.delete("queue:bench")
    began = time.monotonic()
    for start in range(0, jobs, 1000):
        client.push_bulk("bench_jobs.Nothing", args[start:start + 1000], {"queue": "bench"})
    pushed = time.monotonic() - began
    assert server.client.llen("queue:bench") == jobs
    return jobs / relayed, jobs / pushed


@click.command()
@click.option("--latency-count", type=click.IntRange(min=10), default=300, show_default=True)
@click.option("--jobs", type=click.IntRange(min=1000), default=50_000, show_default=True)
@click.option("--database", "admin_url", default="postgresql://postgres@127.0.0.1:5432/postgres",
              show_default=True, help="A PostgreSQL where a database may be created.")
def main(latency_count: int, jobs: int, admin_url: str) -> None:
    name = f"rfetch_outbox_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    try:
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (n INTEGER)")
        with PrivateRedis() as server:
            print(f"load average before: {os.getloadavg()[0]:.2f} (1 min), CPUs: {os.cpu_count()}")
            outbox, direct = latency(url, server, latency_count)
            print(f"commit -> job start, outbox + relay: {_percentiles(outbox)}")
            print(f"push -> job start, direct push:      {_percentiles(direct)}")
            print(f"  ratio of medians outbox / direct: "
                  f"{statistics.median(outbox) / statistics.median(direct):.2f}")
            relayed, pushed = throughput(url, server, jobs)
            print(f"relay throughput: {relayed:,.0f} jobs/s ({jobs:,} jobs, batches of 1,000)")
            print(f"direct push_bulk: {pushed:,.0f} jobs/s (calls of 1,000)")
            print(f"  ratio relay / direct: {relayed / pushed:.2f}")
            print(f"load average after: {os.getloadavg()[0]:.2f} (1 min)")
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
