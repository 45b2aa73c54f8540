"""The worker's defaults, side by side: processes x CPU affinity on three kinds of jobs.

    python -m benchmarks.affinity [--runs 3] [-c 10] [--hash-mb 64] [--scale 1.0]
        [--only 1-adaptive,1-none,1-auto,auto-adaptive,auto-none[,auto-auto,1-none-cpus]]

Candidate settings of ``rfetch worker -c C``, each draining each workload against its own
fresh redis-server, all in one sitting (the drain of ``benchmarks.harness``, as
``benchmarks.compare``; steady jobs/s between 10 % and 90 % done, median of ``--runs``):

* ``1-adaptive``: ``--processes 1 --cpu-affinity adaptive``, the default: one process,
  pinned to one CPU at start and spread over every CPU while that gets it more CPU
  (``rfetch.worker.adaptive_affinity``);
* ``1-none``: ``--processes 1 --cpu-affinity none``, one process, threads placed by the
  kernel;
* ``1-auto``: ``--processes 1 --cpu-affinity auto``, one process always on one CPU;
* ``auto-adaptive``, ``auto-auto``, ``auto-none``: ``--processes auto`` (one process per
  allowed CPU) with each affinity;
* ``1-none-cpus`` (not run unless named in ``--only``): the control, one process placed by
  the kernel with ``-c`` times the allowed CPUs threads, the concurrency ``--processes
  auto`` has in all (does a swarm win by its processes, or by its threads?).

The workloads:

* ``no-op``: ``INCR`` only (``bench_jobs.Noop``), 20,000 jobs;
* ``I/O-bound``: sleep 2 ms and one Redis round trip, then ``INCR`` (``bench_jobs.SocketIO``),
  4,000 jobs: what a typical web application's jobs are made of (a query, an HTTP call);
* ``GIL-releasing CPU``: SHA-256 of a 64 MB buffer (``bench_jobs.HashBuffer``), 1,200 jobs
  (hashlib releases the GIL on large inputs, as zlib, numpy and Pillow do). Adaptive
  affinity spends its first 3 busy seconds or so pinned before its probe spreads it: the
  drain is long enough (about 25 s spread on 2 CPUs) for that to weigh little.

``--scale`` multiplies the job counts (0.1 for a quick check). The candidates take turns
run by run. Prints one table of jobs/s and one of the ratios to the first candidate, with
the load average at the start and the end: compare ratios within one run.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Sequence

import click

from benchmarks.common import RESULTS
from benchmarks.compare import PEERS_PYTHON, Bench
from benchmarks.peers.base import Runtime
from benchmarks.peers.rfetch import RfetchPeer

WORKLOADS = (("no-op", "noop", 20_000), ("I/O-bound", "io", 4_000),
             ("GIL-releasing CPU", "hash", 1_200))
CANDIDATES = {
    "1-adaptive": ("1", "adaptive"),
    "1-none": ("1", "none"),
    "1-auto": ("1", "auto"),
    "auto-auto": ("auto", "auto"),
    "auto-none": ("auto", "none"),
    "auto-adaptive": ("auto", "adaptive"),
    "1-none-cpus": ("1", "none"),
}
"""name -> (--processes, --cpu-affinity). ``1-none-cpus`` is the control: one process with
``-c`` times the CPU count threads, as many as ``--processes auto`` runs in all."""


class SettingsPeer(RfetchPeer):
    """``rfetch worker`` with ``--processes`` and ``--cpu-affinity``, and the hash size."""

    def __init__(self, name: str, hash_mb: int) -> None:
        self.processes, self.affinity = CANDIDATES[name]
        self.hash_mb = hash_mb
        self.key = f"rfetch-{name}"

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [*super().worker_argv(rt, concurrency, queues),
                "--processes", self.processes, "--cpu-affinity", self.affinity]

    def worker_env(self, rt: Runtime, url: str, concurrency: int,
                   queues: Sequence[str]) -> dict[str, str]:
        return {**super().worker_env(rt, url, concurrency, queues),
                "BENCH_HASH_MB": str(self.hash_mb)}


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def threads(name: str, concurrency: int) -> int:
    """Threads per worker process of a candidate."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    return concurrency * cpus if name.endswith("-cpus") else concurrency


def label(name: str, concurrency: int) -> str:
    processes, affinity = CANDIDATES[name]
    return f"`--processes {processes} --cpu-affinity {affinity} -c {threads(name, concurrency)}`"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--runs", default=3, show_default=True, help="Drains per cell (median shown).")
@click.option("--concurrency", "-c", default=10, show_default=True)
@click.option("--hash-mb", default=64, show_default=True, help="Buffer hashed per CPU job.")
@click.option("--scale", default=1.0, show_default=True, help="Multiplies the job counts.")
@click.option("--only", default="1-adaptive,1-none,1-auto,auto-adaptive,auto-none",
              show_default=True,
              help="Candidates, comma-separated; the first is the baseline of the ratios.")
@click.option("--python", "python", default=None,
              help="Interpreter for client and worker. [default: the peers' venv, else this]")
def main(runs: int, concurrency: int, hash_mb: int, scale: float, only: str,
         python: str | None) -> None:
    """Drain no-op, I/O-bound and GIL-releasing CPU jobs with each candidate setting."""
    names = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in names if name not in CANDIDATES]
    if unknown or not names:
        raise click.BadParameter(f"choose among {', '.join(CANDIDATES)}", param_hint="--only")
    rt = Runtime(python or (str(PEERS_PYTHON) if PEERS_PYTHON.exists() else sys.executable))
    logs = RESULTS / f"affinity-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    start_load = load()
    click.echo(f"{os.cpu_count()} CPUs, load average {start_load} at the start", err=True)
    rates: dict[tuple[str, str], float] = {}
    counts: dict[str, int] = {}
    benches = {name: Bench(SettingsPeer(name, hash_mb), rt, logs, limit=600) for name in names}
    for workload, kind, count in WORKLOADS:
        jobs = counts[workload] = max(20, int(count * scale))
        steady: dict[str, list[float]] = {name: [] for name in names}
        # Candidates take turns run by run, so a change of the machine's load meanwhile
        # falls on all of them rather than on the last ones.
        for run in range(1, runs + 1):
            for name in names:
                res = benches[name].drain(kind, jobs, threads(name, concurrency))
                steady[name].append(res["steady"])
                click.echo(f"{workload}, {name}, run {run}: {res['steady']:,.1f} jobs/s "
                           f"(load {load()})", err=True)
        for name in names:
            rates[workload, name] = statistics.median(steady[name])
    click.echo(f"\nrfetch worker, {os.cpu_count()} CPUs, median of {runs} "
               f"run(s); GIL-releasing CPU job: SHA-256 of {hash_mb} MB; load average "
               f"{start_load} at the start, {load()} at the end\n")
    click.echo("| setting | " + " | ".join(f"{w} jobs/s ({counts[w]:,} jobs)"
                                          for w, _, _ in WORKLOADS) + " |")
    click.echo("|---|" + "---:|" * len(WORKLOADS))
    for name in names:
        click.echo(f"| {label(name, concurrency)} | "
                   + " | ".join(f"{rates[w, name]:,.1f}" for w, _, _ in WORKLOADS) + " |")
    base = names[0]
    click.echo(f"\nratio to {label(base, concurrency)}:\n")
    click.echo("| setting | " + " | ".join(w for w, _, _ in WORKLOADS) + " |")
    click.echo("|---|" + "---:|" * len(WORKLOADS))
    for name in names:
        click.echo(f"| {label(name, concurrency)} | "
                   + " | ".join(f"{rates[w, name] / rates[w, base]:.2f}x"
                                for w, _, _ in WORKLOADS) + " |")


if __name__ == "__main__":
    main()
