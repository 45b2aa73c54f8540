"""``--cpu-affinity auto`` against ``none`` on three kinds of jobs, in one run, one table.

    python -m benchmarks.affinity [--runs 3] [-c 10] [--hash-mb 64] [--scale 1.0]

The default one-CPU affinity (``rfetch/affinity.py``) makes GIL hand-offs cheap, which is
what no-op jobs are made of, but keeps work that runs outside the GIL (hashlib, zlib,
numpy on large inputs) on one CPU. Each workload is drained by one ``rfetch worker -c C``
with each setting, against its own fresh redis-server (the same drain as
``benchmarks.compare``: steady jobs/s between 10 % and 90 % done, median of ``--runs``):

* ``no-op``: ``INCR`` only (``bench_jobs.Noop``), 20,000 jobs;
* ``I/O-bound``: sleep 2 ms and one Redis round trip, then ``INCR`` (``bench_jobs.SocketIO``),
  4,000 jobs;
* ``GIL-releasing CPU``: SHA-256 of a 64 MB buffer (``bench_jobs.HashBuffer``), 400 jobs.

``--scale`` multiplies the job counts (0.1 for a quick check). Run it on a quiet machine:
the ratio column (none / auto) is the figure that decides the default.
"""

from __future__ import annotations

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
             ("GIL-releasing CPU", "hash", 400))
SETTINGS = ("auto", "none")


class AffinityPeer(RfetchPeer):
    """``rfetch worker`` with ``--cpu-affinity SETTING`` and the hash buffer's size."""

    def __init__(self, setting: str, hash_mb: int) -> None:
        self.setting = setting
        self.hash_mb = hash_mb
        self.key = f"rfetch-affinity-{setting}"

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [*super().worker_argv(rt, concurrency, queues), "--cpu-affinity", self.setting]

    def worker_env(self, rt: Runtime, url: str, concurrency: int,
                   queues: Sequence[str]) -> dict[str, str]:
        return {**super().worker_env(rt, url, concurrency, queues),
                "BENCH_HASH_MB": str(self.hash_mb)}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--runs", default=3, show_default=True, help="Drains per cell (median shown).")
@click.option("--concurrency", "-c", default=10, show_default=True)
@click.option("--hash-mb", default=64, show_default=True, help="Buffer hashed per CPU job.")
@click.option("--scale", default=1.0, show_default=True, help="Multiplies the job counts.")
@click.option("--python", "python", default=None,
              help="Interpreter for client and worker. [default: the peers' venv, else this]")
def main(runs: int, concurrency: int, hash_mb: int, scale: float, python: str | None) -> None:
    """Drain no-op, I/O-bound and GIL-releasing CPU jobs with --cpu-affinity auto and none."""
    rt = Runtime(python or (str(PEERS_PYTHON) if PEERS_PYTHON.exists() else sys.executable))
    logs = RESULTS / f"affinity-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for label, kind, count in WORKLOADS:
        jobs = max(20, int(count * scale))
        rates: dict[str, float] = {}
        for setting in SETTINGS:
            bench = Bench(AffinityPeer(setting, hash_mb), rt, logs, limit=600)
            steady = []
            for run in range(1, runs + 1):
                res = bench.drain(kind, jobs, concurrency)
                steady.append(res["steady"])
                click.echo(f"{label}, --cpu-affinity {setting}, run {run}: "
                           f"{res['steady']:,.1f} jobs/s", err=True)
            rates[setting] = statistics.median(steady)
        rows.append((label, jobs, rates["auto"], rates["none"]))
    click.echo(f"\nrfetch worker -c {concurrency}, median of {runs} run(s); GIL-releasing CPU "
               f"job: SHA-256 of {hash_mb} MB\n")
    click.echo("| workload | jobs | `auto` jobs/s | `none` jobs/s | none / auto |")
    click.echo("|---|---|---|---|---|")
    for label, jobs, auto, none in rows:
        click.echo(f"| {label} | {jobs:,} | {auto:,.1f} | {none:,.1f} | {none / auto:.2f}x |")


if __name__ == "__main__":
    main()
