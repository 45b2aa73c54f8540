"""What one job costs Redis, one shard against two, and the cost of waiting for replicas
after acknowledgements.

    python -m benchmarks.redis_cost [--jobs 50000] [-c 10] [--shards 1 --shards 2]
                                    [--single 5000] [--ack-wait]

For each shard count, fresh redis-servers (no persistence) get ``--jobs`` no-op jobs
(``bench_jobs.Nothing``) pushed in bulk, split over two queues (``a`` on shard 0, ``b`` on
the last shard), then one ``rfetch worker`` drains them (one launcher per shard,
``Config.shards``). After the drain, ``--single`` more jobs are pushed one ``push`` at a time
(what ``perform_async`` does), and not drained. From every server it reads, before and after
each phase:

* Redis CPU time, ``INFO cpu`` ``used_cpu_sys + used_cpu_user``: milliseconds per 1,000
  jobs (= microseconds per job);
* commands per job, from ``INFO commandstats`` (the harness's own INFO and GET calls left
  out). Redis counts the commands a Lua script runs as well as the ``EVALSHA`` itself, so
  this is the work Redis does, not the round trips; script calls (``evalsha`` or ``fcall``)
  per job are shown apart;
* the drain's wall time and jobs/s.

From the drain plus a one-at-a-time push (the dearer push), it derives the jobs/s one
Redis core carries (1,000,000 / Redis CPU microseconds per job) and the shard count a
100,000 jobs/s workload needs. The load average is printed first: on a loaded or 2-core
machine the workers, Redis and the harness share the CPUs, and jobs/s is a floor, while
Redis CPU per job changes much less.

``--ack-wait`` also drains ``--jobs`` on one master with one replica (both private), with
``min_replicas=1``, once without and once with ``min_replicas_acks``, and prints jobs/s and
the master's CPU and commands per job of each, side by side.
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
from rfetch.config import Config
from rfetch.push.client import Client

HERE = Path(__file__).resolve().parent

Snapshot = tuple[float, dict[str, int]]

TARGET = 100_000
"""The workload the note sizes shards for, jobs/s."""

HEADROOM = 0.5
"""Share of a Redis core to plan for: the rest absorbs bursts, recovery scans, the web UI
and the replication stream."""


def cpu_seconds(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def snapshot(servers: list[PrivateRedis]) -> Snapshot:
    """Total Redis CPU seconds and command calls over ``servers``."""
    cpu = 0.0
    calls: dict[str, int] = {}
    for server in servers:
        cpu += cpu_seconds(server.client)
        for name, count in command_counts(server.client).items():
            calls[name] = calls.get(name, 0) + count
    return cpu, calls


def cost(before: Snapshot, after: Snapshot, polls: int) -> tuple[float, dict[str, int]]:
    """(CPU seconds, commands by name) between two snapshots, less the harness's calls."""
    calls = diff_counts(before[1], after[1])
    calls.pop("info", None)
    calls["get"] = calls.get("get", 0) - polls
    return after[0] - before[0], {name: n for name, n in calls.items() if n}


def phase(cpu: float, calls: dict[str, int], jobs: int, prefix: str) -> dict[str, float]:
    return {
        f"{prefix}_us": cpu * 1e6 / jobs,
        f"{prefix}_cmds": sum(calls.values()) / jobs,
        f"{prefix}_evalsha": (calls.get("evalsha", 0) + calls.get("fcall", 0)) / jobs,
    }


def drain(servers: list[PrivateRedis], env: dict[str, str], total: int, concurrency: int,
          log: Path) -> tuple[float, float, dict[str, int]]:
    """Start one worker on queues a and b, wait until ``total`` jobs are processed; return
    (seconds, Redis CPU seconds, commands by name)."""
    before = snapshot(servers)
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", "-r", "bench_jobs", "-q", "a",
             "-q", "b", "-c", str(concurrency)],
            env=env, cwd=HERE, stdout=out, stderr=subprocess.STDOUT,
        )
        try:
            started = time.monotonic()
            polls = 0
            while True:
                done = 0
                for server in servers:
                    done += int(server.client.get("stat:processed") or 0)
                    polls += 1
                if done >= total:
                    break
                if worker.poll() is not None or time.monotonic() - started > 1800:
                    raise RuntimeError(f"the worker stopped or timed out; see {log}")
                time.sleep(0.05)
            seconds = time.monotonic() - started
            cpu, calls = cost(before, snapshot(servers), polls)
        finally:
            if worker.poll() is None:
                worker.terminate()
                worker.wait(60)
    return seconds, cpu, calls


def run(
    shards: int, jobs: int, single: int, concurrency: int, logs: Path
) -> tuple[dict[str, float], str]:
    """One row: bulk push, drain and one-at-a-time pushes on ``shards`` fresh servers;
    the figures, and the drain's commands per job by name."""
    servers = [PrivateRedis() for _ in range(shards)]
    urls = [s.url for s in servers]
    env = dict(os.environ)
    env.update({"RFETCH_SHARDS": " ".join(urls), "RFETCH_SHARD_MAP": f"a=0,b={shards - 1}",
                "RFETCH_HEARTBEAT_INTERVAL": "0.5", "RFETCH_HEARTBEAT_TTL": "5",
                "PYTHONPATH": str(HERE), "REDIS_URL": urls[0]})
    config = Config.from_env(env)
    try:
        client = Client(config)
        start = snapshot(servers)
        for queue in ("a", "b"):
            client.push_bulk("bench_jobs.Nothing", [[i] for i in range(jobs // 2)],
                             {"queue": queue})
        push_cpu, push_calls = cost(start, snapshot(servers), 0)
        total = (jobs // 2) * 2
        seconds, drain_cpu, drain_calls = drain(
            servers, env, total, concurrency, logs / f"worker-{shards}.log"
        )
        before = snapshot(servers)
        for i in range(single):
            client.push("bench_jobs.Nothing", [i], {"queue": "a" if i % 2 else "b"})
        single_cpu, single_calls = cost(before, snapshot(servers), 0)
        figures = {
            "jobs": total, "drain_s": seconds, "drain_jobs_s": total / seconds,
            **phase(push_cpu, push_calls, total, "bulk"),
            **phase(drain_cpu, drain_calls, total, "drain"),
            **phase(single_cpu, single_calls, max(single, 1), "single"),
        }
        return figures, top(drain_calls, total)
    finally:
        for server in servers:
            server.close()


def top(calls: dict[str, int], jobs: int) -> str:
    """The commands Redis ran most, per job: ``lmove 1.00, lrem 1.00, ...``."""
    ranked = sorted(calls.items(), key=lambda item: -item[1])[:6]
    return ", ".join(f"{name} {count / jobs:.2f}" for name, count in ranked)


def run_ack_wait(jobs: int, concurrency: int, acks: bool, logs: Path) -> dict[str, float]:
    """Drain ``jobs`` on a master with one replica, ``min_replicas=1``, with or without
    ``min_replicas_acks``."""
    master = PrivateRedis()
    replica = PrivateRedis(("--replicaof", "127.0.0.1", str(master.port)))
    try:
        for _ in range(500):
            if replica.client.info("replication").get("master_link_status") == "up":
                break
            time.sleep(0.02)
        else:
            raise RuntimeError("the replica did not sync in 10 s")
        env = dict(os.environ)
        env.update({"REDIS_URL": master.url, "RFETCH_MIN_REPLICAS": "1",
                    "RFETCH_MIN_REPLICAS_ACKS": "true" if acks else "false",
                    "RFETCH_HEARTBEAT_INTERVAL": "0.5", "RFETCH_HEARTBEAT_TTL": "5",
                    "PYTHONPATH": str(HERE)})
        env.pop("RFETCH_SHARDS", None)
        client = Client(Config.from_env(env))
        for queue in ("a", "b"):
            client.push_bulk("bench_jobs.Nothing", [[i] for i in range(jobs // 2)],
                             {"queue": queue})
        total = (jobs // 2) * 2
        seconds, cpu, calls = drain([master], env, total, concurrency,
                                    logs / f"worker-acks-{int(acks)}.log")
        return {"drain_jobs_s": total / seconds, **phase(cpu, calls, total, "drain"),
                "waits": (calls.get("wait", 0) + calls.get("waitaof", 0)) / total}
    finally:
        replica.close()
        master.close()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=50_000, show_default=True, help="No-op jobs per drain.")
@click.option("--single", default=5_000, show_default=True,
              help="Jobs pushed one at a time after the drain (the per-push cost).")
@click.option("--concurrency", "-c", default=10, show_default=True,
              help="Threads per shard of the worker.")
@click.option("--shards", "shard_counts", multiple=True, type=int, default=(1, 2),
              show_default=True, help="Shard counts to compare; repeatable.")
@click.option("--ack-wait", is_flag=True,
              help="Also measure min_replicas_acks on a master with one replica.")
def main(jobs: int, single: int, concurrency: int, shard_counts: tuple[int, ...],
         ack_wait: bool) -> None:
    """Redis CPU time and commands per job for the no-op drain, with 1 and 2 shards."""
    logs = HERE / "results" / f"redis-cost-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    click.echo(f"{os.cpu_count()} CPUs, load average {load:.2f} at start; {jobs:,} jobs per "
               f"drain, -c {concurrency}; logs in {logs}")
    click.echo("| shards | drain jobs/s | drain: Redis CPU µs / job | commands / job | "
               "EVALSHA / job | bulk push: µs / job, commands / job | "
               "single push: µs / job, commands / job |")
    click.echo("|---|---|---|---|---|---|---|")
    rows = []
    tops = []
    for shards in shard_counts:
        row, drained = run(shards, jobs, single, concurrency, logs)
        rows.append((shards, row))
        tops.append((shards, drained))
        click.echo(
            f"| {shards} | {row['drain_jobs_s']:,.0f} | {row['drain_us']:.2f} | "
            f"{row['drain_cmds']:.2f} | {row['drain_evalsha']:.3f} | "
            f"{row['bulk_us']:.2f}, {row['bulk_cmds']:.2f} | "
            f"{row['single_us']:.2f}, {row['single_cmds']:.2f} |"
        )
    for shards, drained in tops:
        click.echo(f"drain commands per job, {shards} shard(s): {drained}")
    first = rows[0][1]
    if len(rows) > 1:
        click.echo(f"drain jobs/s, {rows[1][0]} shards / {rows[0][0]}: "
                   f"{rows[1][1]['drain_jobs_s'] / first['drain_jobs_s']:.2f}")
    per_job = first["drain_us"] + first["single_us"]
    per_core = 1e6 / per_job
    click.echo("")
    click.echo(
        f"Per job (one-at-a-time push + drain): {first['single_us']:.2f} + "
        f"{first['drain_us']:.2f} = {per_job:.2f} µs of Redis CPU, so one Redis core "
        f"carries 1,000,000 / {per_job:.2f} = {per_core:,.0f} jobs/s at 100 %."
    )
    click.echo(
        f"{TARGET:,} jobs/s needs {TARGET:,} / {per_core:,.0f} = {TARGET / per_core:.2f} "
        f"core(s): {math.ceil(TARGET / per_core)} shard(s) at 100 %, "
        f"{math.ceil(TARGET / (HEADROOM * per_core))} at a {HEADROOM:.0%} target."
    )
    if ack_wait:
        click.echo("")
        click.echo("| min_replicas=1, one replica | drain jobs/s | master CPU µs / job | "
                   "commands / job | WAIT / job |")
        click.echo("|---|---|---|---|---|")
        measured = []
        for acks in (False, True):
            row = run_ack_wait(jobs, concurrency, acks, logs)
            measured.append(row)
            click.echo(f"| min_replicas_acks={'on' if acks else 'off'} | "
                       f"{row['drain_jobs_s']:,.0f} | {row['drain_us']:.2f} | "
                       f"{row['drain_cmds']:.2f} | {row['waits']:.3f} |")
        click.echo(f"drain jobs/s, acks on / off: "
                   f"{measured[1]['drain_jobs_s'] / measured[0]['drain_jobs_s']:.2f}")


if __name__ == "__main__":
    main()
