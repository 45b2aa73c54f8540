"""What ``store_result`` costs per job: the no-op drain (``bench_jobs.Nothing``) of plain jobs
against the same jobs pushed with ``store_result``, alternated in one sitting.

    python -m benchmarks.results_cost [--jobs 20000] [-c 10] [--runs 1]

Each drain gets a fresh redis-server (no persistence, ``benchmarks.common.PrivateRedis``):
``--jobs`` jobs pushed in bulk to queue ``a``, then one ``rfetch worker`` drains them. From
the end of the push to the end of the drain it reads ``INFO commandstats`` (commands per job,
the harness's own INFO and GET calls left out) and ``INFO cpu`` (Redis CPU per 1,000 jobs),
and the drain's jobs/s (until ``stat:processed``, flushed by the heartbeat every 0.5 s,
reaches the count). A recorded job's acknowledgement is its own ``complete.lua`` call
(EVALSHA) instead of riding on the next fetch, and writes its record and wake token there.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import click

from benchmarks.common import PrivateRedis, command_counts, diff_counts
from benchmarks.redis_cost import cpu_seconds
from rfetch.config import Config
from rfetch.push.client import Client

HERE = Path(__file__).resolve().parent

VARIANTS = {"plain": {}, "store_result": {"store_result": 3600}}


def drain(options: dict[str, int], jobs: int, concurrency: int, log: Path) -> dict[str, float]:
    """One push and drain on a fresh server; the figures of the drain."""
    server = PrivateRedis()
    worker: subprocess.Popen[bytes] | None = None
    env = {**os.environ, "REDIS_URL": server.url, "PYTHONPATH": str(HERE),
           "RFETCH_HEARTBEAT_INTERVAL": "0.5", "RFETCH_HEARTBEAT_TTL": "5"}
    try:
        client = Client(Config(redis_url=server.url))
        client.push_bulk("bench_jobs.Nothing", [[i] for i in range(jobs)],
                         {"queue": "a", **options})
        before_cpu, before = cpu_seconds(server.client), command_counts(server.client)
        with log.open("wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "rfetch.cli", "worker", "-r", "bench_jobs", "-q", "a",
                 "-c", str(concurrency)],
                env=env, cwd=HERE, stdout=out, stderr=subprocess.STDOUT,
            )
            started, polls = time.monotonic(), 0
            while int(server.client.get("stat:processed") or 0) < jobs:
                polls += 1
                if worker.poll() is not None or time.monotonic() - started > 1800:
                    raise RuntimeError(f"the worker stopped or timed out; see {log}")
                time.sleep(0.02)
            seconds = time.monotonic() - started
            after_cpu, after = cpu_seconds(server.client), command_counts(server.client)
        calls = diff_counts(before, after)
        calls.pop("info", None)
        calls["get"] = calls.get("get", 0) - polls - 1
        return {
            "jobs_s": jobs / seconds,
            "cmds_per_job": sum(calls.values()) / jobs,
            "evalsha_per_job": (calls.get("evalsha", 0) + calls.get("fcall", 0)) / jobs,
            "cpu_ms_per_1000": (after_cpu - before_cpu) * 1e6 / jobs,
        }
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(60)
        server.close()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=20_000, show_default=True, help="No-op jobs per drain.")
@click.option("--concurrency", "-c", default=10, show_default=True, help="Worker threads.")
@click.option("--runs", default=1, show_default=True, help="Drains of each variant.")
def main(jobs: int, concurrency: int, runs: int) -> None:
    """Commands per job and jobs/s of plain jobs against store_result jobs."""
    logs = HERE / "results" / f"results-cost-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    click.echo(f"{os.cpu_count()} CPUs, load average {load:.2f} at start; logs in {logs}")
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for i in range(1, runs + 1):
        for name, options in VARIANTS.items():
            row = drain(options, jobs, concurrency, logs / f"{name}-{i}.log")
            rows[name].append(row)
            click.echo(f"run {i} {name}: {row['jobs_s']:,.0f} jobs/s, "
                       f"{row['cmds_per_job']:.2f} commands/job "
                       f"({row['evalsha_per_job']:.2f} EVALSHA), "
                       f"{row['cpu_ms_per_1000']:.0f} ms Redis CPU / 1,000 jobs")
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for name, rs in rows.items()}
    plain, recorded = med["plain"], med["store_result"]
    click.echo("")
    click.echo("| variant | drain jobs/s | commands / job | EVALSHA / job | "
               "Redis CPU ms / 1,000 jobs |")
    click.echo("|---|---|---|---|---|")
    for name, m in med.items():
        click.echo(f"| {name} | {m['jobs_s']:,.0f} | {m['cmds_per_job']:.2f} | "
                   f"{m['evalsha_per_job']:.2f} | {m['cpu_ms_per_1000']:.0f} |")
    click.echo(f"store_result / plain: {recorded['jobs_s'] / plain['jobs_s']:.2f}x jobs/s, "
               f"+{recorded['cmds_per_job'] - plain['cmds_per_job']:.2f} commands/job, "
               f"{recorded['cpu_ms_per_1000'] / plain['cpu_ms_per_1000']:.2f}x Redis CPU")


if __name__ == "__main__":
    main()
