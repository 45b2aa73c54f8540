"""rfetch no-op drain: N jobs, one worker process at -c C, steady jobs/s and peak RSS.

    python benchmarks/rfetch_drain.py [--jobs 20000] [--concurrency 10] [--runs 3] [--sleep]

Starts its own redis-server. Steady jobs/s is measured between 10 % and 90 % of the jobs
done (so start-up and tail are left out), median of the runs. Also prints Redis commands
per job from INFO commandstats.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import click

from benchmarks.common import (
    PrivateRedis,
    command_counts,
    diff_counts,
    env_with,
    peak_rss_mb,
    wait_count,
)

HERE = Path(__file__).resolve().parent


(HERE / "results").mkdir(exist_ok=True)


def one_run(jobs: int, concurrency: int, sleep: bool, extra: tuple[str, ...]) -> dict[str, float]:
    server = PrivateRedis()
    try:
        sys.path.insert(0, str(HERE))
        import bench_jobs

        import rfetch

        client = rfetch.Client(rfetch.Config(redis_url=server.url))
        job = bench_jobs.SleepIO if sleep else bench_jobs.Noop
        started = time.perf_counter()
        client.push_bulk(job.job_name(), [[i] for i in range(jobs)])
        enqueue_rate = jobs / (time.perf_counter() - started)
        before = command_counts(server.client)
        log = open(HERE / "results" / "worker.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", "-r", "bench_jobs",
             "-c", str(concurrency), *extra],
            cwd=HERE, env=env_with(server.url),
            stdout=subprocess.DEVNULL, stderr=log,
        )
        marks = wait_count(server.client, "bench:done", jobs, timeout=600)
        rss = peak_rss_mb(proc.pid)
        after = command_counts(server.client)
        proc.terminate()
        proc.wait(30)
        log.close()
        steady = jobs * 0.8 / (marks[0.9] - marks[0.1])
        commands = diff_counts(before, after)
        # The job's own INCR is part of the workload, not of rfetch's cost.
        per_job = (sum(commands.values()) - commands.get("incrby", 0) - commands.get("get", 0)) / jobs
        return {"steady": steady, "enqueue": enqueue_rate, "rss": rss, "cmds_per_job": per_job,
                "commands": commands}  # type: ignore[dict-item]
    finally:
        server.close()


@click.command()
@click.option("--jobs", default=20_000, show_default=True)
@click.option("--concurrency", "-c", default=10, show_default=True)
@click.option("--runs", default=3, show_default=True)
@click.option("--sleep", is_flag=True, help="1 ms I/O-sleep jobs instead of no-op.")
@click.argument("worker_args", nargs=-1)
def main(jobs: int, concurrency: int, runs: int, sleep: bool, worker_args: tuple[str, ...]) -> None:
    """Measure rfetch's drain rate; WORKER_ARGS go to `rfetch worker`."""
    results = [one_run(jobs, concurrency, sleep, worker_args) for _ in range(runs)]
    for i, res in enumerate(results, 1):
        click.echo(f"run {i}: steady {res['steady']:.0f} jobs/s, bulk enqueue {res['enqueue']:.0f} "
                   f"jobs/s, peak RSS {res['rss']:.1f} MB, rfetch commands/job {res['cmds_per_job']:.2f}")
    click.echo(f"median steady jobs/s: {statistics.median(r['steady'] for r in results):.0f}; "
               f"median bulk enqueue jobs/s: {statistics.median(r['enqueue'] for r in results):.0f}; "
               f"max peak RSS MB: {max(r['rss'] for r in results):.1f}")
    click.echo(f"commands (last run): {results[-1]['commands']}")


if __name__ == "__main__":
    main()
