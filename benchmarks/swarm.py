"""``--processes 1`` against ``--processes 2``, side by side in one run.

    python -m benchmarks.swarm [--cpu-jobs 4000] [--noop-jobs 20000] [-c 10] [--runs 1]

Two workloads, each drained by ``rfetch worker -c C --processes P`` for P = 1 and 2, each run
against its own fresh redis-server (the harness of ``benchmarks.compare``,
``benchmarks.harness``; steady jobs/s between 10 % and 90 % done, peak RSS of the whole
process tree):

* ``cpu``: jobs of about 5 ms of pure Python each (``bench_jobs.Cpu``, measured by the
  thread's CPU clock): one process is bound by its GIL, two can use two CPUs.
* ``noop``: the no-op drain (one INCR per job): rfetch's own overhead per job.

Prints jobs/s for each and the ratio of 2 processes to 1. Run it on a quiet machine: on two
cores the workers, Redis and the harness share the CPUs.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import click

from benchmarks.common import RESULTS
from benchmarks.compare import PEERS_PYTHON, Bench
from benchmarks.peers.base import Runtime
from benchmarks.rfetch_drain import RfetchWithArgs


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--cpu-jobs", default=4000, show_default=True, help="5 ms CPU jobs per drain.")
@click.option("--noop-jobs", default=20_000, show_default=True, help="No-op jobs per drain.")
@click.option("--concurrency", "-c", default=10, show_default=True)
@click.option("--runs", default=1, show_default=True, help="Drains per row; the median shows.")
@click.option("--python", "python", default=None,
              help="Interpreter for client and worker. [default: the peers' venv, else this]")
def main(cpu_jobs: int, noop_jobs: int, concurrency: int, runs: int,
         python: str | None) -> None:
    """Drain CPU-bound and no-op jobs with one and with two worker processes."""
    rt = Runtime(python or (str(PEERS_PYTHON) if PEERS_PYTHON.exists() else sys.executable))
    logs = RESULTS / f"swarm-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    click.echo(f"{os.cpu_count()} CPUs, load average {load:.2f} at start; logs in {logs}")
    rows: dict[tuple[str, int], float] = {}
    for kind, jobs in (("cpu", cpu_jobs), ("noop", noop_jobs)):
        for processes in (1, 2):
            bench = Bench(RfetchWithArgs(["--processes", str(processes)]), rt, logs, limit=600)
            rates = []
            for _ in range(runs):
                result = bench.drain(kind, jobs, concurrency)
                rates.append(result["steady"])
                click.echo(f"{kind:5} --processes {processes}: {result['steady']:9,.0f} jobs/s"
                           f"  (peak RSS {result['rss_mb']:.0f} MB, "
                           f"{result['cmds_per_job']:.2f} commands/job)")
            rows[kind, processes] = statistics.median(rates)
    click.echo("")
    click.echo("| workload | --processes 1 | --processes 2 | ratio 2/1 |")
    click.echo("|---|---:|---:|---:|")
    for kind in ("cpu", "noop"):
        one, two = rows[kind, 1], rows[kind, 2]
        click.echo(f"| {kind} | {one:,.0f} | {two:,.0f} | {two / one:.2f}x |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    click.echo(f"load average {load:.2f} at the end")


if __name__ == "__main__":
    main()
