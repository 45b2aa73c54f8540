"""What a batched job costs Redis against a plain one, measured in one sitting.

    python -m benchmarks.batch_cost [--jobs 20000] [-c 10] [--rounds 2]

Each round pushes ``--jobs`` no-op jobs (``bench_jobs.Nothing``) to a fresh redis-server (no
persistence), plain (``push_bulk``) or as one batch (``rfetch.Batch().jobs()`` around the
same ``push_bulk``), then one ``rfetch worker`` drains them; plain and batched rounds
alternate, so load on the machine falls on both alike. For each it reads:

* commands per job from ``INFO commandstats`` (the commands Lua scripts run count too; the
  harness's own INFO and GET calls left out), for the push and for the drain;
* Redis CPU (``used_cpu_sys + used_cpu_user``) per 1,000 jobs;
* the drain's jobs/s (until ``stat:processed`` reaches the job count).

The table ends with the batched / plain ratios. On a loaded 2-core machine jobs/s is a floor
(the worker, Redis and the harness share the CPUs); commands per job do not depend on load.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import click

import rfetch
from benchmarks.common import PrivateRedis, command_counts, diff_counts
from rfetch.config import Config
from rfetch.push.client import Client

HERE = Path(__file__).resolve().parent


def _snapshot(server: PrivateRedis) -> tuple[float, dict[str, int]]:
    info = server.client.info("cpu")
    return (float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
            command_counts(server.client))


def _cost(before: tuple[float, dict[str, int]], after: tuple[float, dict[str, int]],
          polls: int) -> tuple[float, int, dict[str, int]]:
    calls = diff_counts(before[1], after[1])
    calls.pop("info", None)
    calls["get"] = calls.get("get", 0) - polls
    calls = {name: n for name, n in calls.items() if n}
    return after[0] - before[0], sum(calls.values()), calls


def run(batched: bool, jobs: int, concurrency: int, logs: Path) -> dict[str, float]:
    """One round: push ``jobs`` (as one batch if ``batched``), drain them with one worker."""
    server = PrivateRedis()
    env = dict(os.environ)
    env.update({"RFETCH_HEARTBEAT_INTERVAL": "0.5", "PYTHONPATH": str(HERE),
                "REDIS_URL": server.url})
    worker: subprocess.Popen[bytes] | None = None
    try:
        client = Client(Config(redis_url=server.url))
        start = _snapshot(server)
        t0 = time.monotonic()
        args = [[i] for i in range(jobs)]
        if batched:
            batch = rfetch.Batch(description="benchmark", client=client)
            with batch.jobs():
                client.push_bulk("bench_jobs.Nothing", args)
        else:
            client.push_bulk("bench_jobs.Nothing", args)
        push_s = time.monotonic() - t0
        pushed = _snapshot(server)
        name = "batched" if batched else "plain"
        log = (logs / f"worker-{name}-{int(time.time() * 1000)}.log").open("wb")
        worker = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", "-r", "bench_jobs",
             "-c", str(concurrency)],
            env=env, cwd=HERE, stdout=log, stderr=subprocess.STDOUT,
        )
        t1 = time.monotonic()
        polls = 0
        while int(server.client.get("stat:processed") or 0) < jobs:
            polls += 1
            if worker.poll() is not None or time.monotonic() - t1 > 1800:
                raise RuntimeError(f"the worker stopped or timed out; see {log.name}")
            time.sleep(0.05)
        polls += 1
        drain_s = time.monotonic() - t1
        drained = _snapshot(server)
        if batched and not server.client.hexists(f"b-{batch.bid}", "success_at"):
            raise RuntimeError("every job ran but the batch has not succeeded")
        push_cpu, push_cmds, _ = _cost(start, pushed, 0)
        drain_cpu, drain_cmds, calls = _cost(pushed, drained, polls)
        return {
            "push_s": push_s, "push_cmds_per_job": push_cmds / jobs,
            "push_cpu_ms_per_1000": push_cpu * 1e6 / jobs, "drain_s": drain_s,
            "drain_jobs_s": jobs / drain_s, "cmds_per_job": drain_cmds / jobs,
            "cpu_ms_per_1000": drain_cpu * 1e6 / jobs,
            **{f"cmd:{k}": v / jobs for k, v in calls.items()},
        }
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            worker.wait(60)
        server.close()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=20_000, show_default=True, help="No-op jobs per round.")
@click.option("--concurrency", "-c", default=10, show_default=True, help="Worker threads.")
@click.option("--rounds", default=2, show_default=True,
              help="Rounds of each kind, alternating plain and batched.")
def main(jobs: int, concurrency: int, rounds: int) -> None:
    """Commands per job, Redis CPU and jobs/s of batched against plain no-op jobs."""
    logs = HERE / "results" / f"batch-cost-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    click.echo(f"{os.cpu_count()} CPUs, load average {load:.2f} at start; logs in {logs}")
    click.echo("| round | kind | drain jobs/s | drain commands / job | Redis CPU ms / 1,000 | "
               "push commands / job | push s |")
    click.echo("|---|---|---|---|---|---|---|")
    rows: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for n in range(rounds):
        for batched in (False, True):
            row = run(batched, jobs, concurrency, logs)
            rows[batched].append(row)
            click.echo(
                f"| {n + 1} | {'batched' if batched else 'plain'} | {row['drain_jobs_s']:,.0f} "
                f"| {row['cmds_per_job']:.2f} | {row['cpu_ms_per_1000']:.0f} | "
                f"{row['push_cmds_per_job']:.3f} | {row['push_s']:.2f} |"
            )

    def mean(batched: bool, key: str) -> float:
        values = [r.get(key, 0.0) for r in rows[batched]]
        return sum(values) / len(values)

    click.echo("")
    for key, label in (("drain_jobs_s", "drain jobs/s"), ("cmds_per_job", "commands / job"),
                       ("cpu_ms_per_1000", "Redis CPU / job")):
        plain, batched = mean(False, key), mean(True, key)
        click.echo(f"batched / plain {label}: {batched / plain:.2f}x "
                   f"({batched:,.2f} vs {plain:,.2f}, mean of {rounds})")
    names = sorted({k for r in rows[True] + rows[False] for k in r if k.startswith("cmd:")})
    click.echo("commands per job by name (plain -> batched): " + ", ".join(
        f"{k[4:]} {mean(False, k):.2f} -> {mean(True, k):.2f}" for k in names
    ))


if __name__ == "__main__":
    main()
