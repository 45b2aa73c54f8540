"""What one job costs Redis, and one shard against two.

    python -m benchmarks.redis_cost [--jobs 20000] [-c 10] [--shards 1 --shards 2]

For each shard count, fresh redis-servers (no persistence) get ``--jobs`` no-op jobs
(``bench_jobs.Nothing``) pushed in bulk, split over two queues (``a`` on shard 0, ``b`` on
the last shard), then one ``rfetch worker`` drains them (one launcher per shard,
``Config.shards``). Between the end of the push and the end of the drain it reads from every
server:

* Redis CPU time, ``INFO cpu`` ``used_cpu_sys + used_cpu_user``: seconds per 1,000 jobs,
  and from it the jobs/s that one Redis core could carry (1,000 / CPU seconds per 1,000);
* commands per job, from ``INFO commandstats`` (the harness's own INFO and GET calls left
  out);
* the drain's wall time and jobs/s.

The push is measured the same way, on its own. The note at the end derives the shard count
a 100,000 jobs/s workload needs from the measured per-job cost. The load average is printed
first: on a loaded or 2-core machine the workers, Redis and the harness share the CPUs, and
jobs/s is a floor, while Redis CPU per job changes much less.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import redis

from benchmarks.common import PrivateRedis, command_counts, diff_counts
from rfetch.client import Client
from rfetch.config import Config

HERE = Path(__file__).resolve().parent


def cpu_seconds(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def snapshot(servers: list[PrivateRedis]) -> tuple[float, dict[str, int]]:
    """Total Redis CPU seconds and command calls over ``servers``."""
    cpu = 0.0
    calls: dict[str, int] = {}
    for server in servers:
        cpu += cpu_seconds(server.client)
        for name, count in command_counts(server.client).items():
            calls[name] = calls.get(name, 0) + count
    return cpu, calls


def cost(before: tuple[float, dict[str, int]], after: tuple[float, dict[str, int]],
         polls: int) -> tuple[float, int]:
    """(CPU seconds, commands) between two snapshots, less the harness's own calls."""
    calls = diff_counts(before[1], after[1])
    calls.pop("info", None)
    calls["get"] = calls.get("get", 0) - polls
    return after[0] - before[0], sum(calls.values())


def run(shards: int, jobs: int, concurrency: int, logs: Path) -> dict[str, float]:
    servers = [PrivateRedis() for _ in range(shards)]
    urls = [s.url for s in servers]
    env = dict(os.environ)
    env.update({"RFETCH_SHARDS": " ".join(urls), "RFETCH_SHARD_MAP": f"a=0,b={shards - 1}",
                "RFETCH_HEARTBEAT_INTERVAL": "0.5", "RFETCH_HEARTBEAT_TTL": "5",
                "PYTHONPATH": str(HERE), "REDIS_URL": urls[0]})
    config = Config.from_env(env)
    worker: subprocess.Popen[bytes] | None = None
    try:
        start = snapshot(servers)
        client = Client(config)
        t0 = time.monotonic()
        for queue in ("a", "b"):
            client.push_bulk("bench_jobs.Nothing", [[i] for i in range(jobs // 2)],
                             {"queue": queue})
        push_s = time.monotonic() - t0
        pushed = snapshot(servers)
        log = (logs / f"worker-{shards}.log").open("wb")
        worker = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", "-r", "bench_jobs", "-q", "a",
             "-q", "b", "-c", str(concurrency)],
            env=env, cwd=HERE, stdout=log, stderr=subprocess.STDOUT,
        )
        t1 = time.monotonic()
        polls = 0
        while True:
            done = 0
            for server in servers:
                done += int(server.client.get("stat:processed") or 0)
                polls += 1
            if done >= (jobs // 2) * 2:
                break
            if worker.poll() is not None or time.monotonic() - t1 > 1800:
                raise RuntimeError(f"the worker stopped or timed out; see {log.name}")
            time.sleep(0.05)
        drain_s = time.monotonic() - t1
        drained = snapshot(servers)
        push_cpu, push_cmds = cost(start, pushed, 0)
        drain_cpu, drain_cmds = cost(pushed, drained, polls)
        total = (jobs // 2) * 2
        return {
            "jobs": total, "push_s": push_s, "push_cpu_ms_per_1000": push_cpu * 1e6 / total,
            "push_cmds_per_job": push_cmds / total, "drain_s": drain_s,
            "drain_jobs_s": total / drain_s, "cpu_ms_per_1000": drain_cpu * 1e6 / total,
            "cmds_per_job": drain_cmds / total,
        }
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(60)
        for server in servers:
            server.close()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=20_000, show_default=True, help="No-op jobs per drain.")
@click.option("--concurrency", "-c", default=10, show_default=True,
              help="Threads per shard of the worker.")
@click.option("--shards", "shard_counts", multiple=True, type=int, default=(1, 2),
              show_default=True, help="Shard counts to compare; repeatable.")
def main(jobs: int, concurrency: int, shard_counts: tuple[int, ...]) -> None:
    """Redis CPU time and commands per job for the no-op drain, with 1 and 2 shards."""
    logs = HERE / "results" / f"redis-cost-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    click.echo(f"{os.cpu_count()} CPUs, load average {load:.2f} at start; logs in {logs}")
    click.echo("| shards | drain jobs/s | Redis CPU ms / 1,000 jobs | commands / job | "
               "push: CPU ms / 1,000, commands / job |")
    click.echo("|---|---|---|---|---|")
    first: dict[str, float] | None = None
    for shards in shard_counts:
        row = run(shards, jobs, concurrency, logs)
        first = first or row
        click.echo(
            f"| {shards} | {row['drain_jobs_s']:,.0f} | {row['cpu_ms_per_1000']:.0f} | "
            f"{row['cmds_per_job']:.2f} | {row['push_cpu_ms_per_1000']:.0f}, "
            f"{row['push_cmds_per_job']:.2f} |"
        )
    assert first is not None
    per_job_ms = (first["cpu_ms_per_1000"] + first["push_cpu_ms_per_1000"]) / 1000
    per_core = 1000 / per_job_ms if per_job_ms > 0 else float("inf")
    click.echo("")
    click.echo(f"One Redis core carries about {per_core:,.0f} jobs/s (push + drain, "
               f"{per_job_ms:.3f} ms of Redis CPU per job); 100,000 jobs/s needs "
               f"{math.ceil(100_000 / per_core)} shard(s) at 100 % of a core, "
               f"{math.ceil(100_000 / (0.5 * per_core))} at a 50 % target.")


if __name__ == "__main__":
    main()
