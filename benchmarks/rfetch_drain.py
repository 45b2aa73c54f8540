"""rfetch alone: N jobs, one worker process at -c C, steady jobs/s, RSS, commands per job.

    python -m benchmarks.rfetch_drain [--jobs 20000] [-c 10] [--runs 3] [--sleep]
        [--no-job-logs] [-- ARGS]

The quick loop for work on rfetch's fetch path; ``python -m benchmarks.compare`` runs the
same drain (same code) for rfetch and every peer. Starts its own redis-server per run.
Steady jobs/s is measured between 10 % and 90 % of the jobs done, median of the runs.
ARGS after ``--`` go to ``rfetch worker``.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence

import click

from benchmarks.common import RESULTS, load
from benchmarks.compare import PEERS_PYTHON, Bench
from benchmarks.peers.base import Runtime
from benchmarks.peers.rfetch import RfetchPeer


class RfetchWithArgs(RfetchPeer):
    def __init__(self, extra: Sequence[str]) -> None:
        self.extra = list(extra)

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [*super().worker_argv(rt, concurrency, queues), *self.extra]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=20_000, show_default=True)
@click.option("--concurrency", "-c", default=10, show_default=True)
@click.option("--runs", default=3, show_default=True)
@click.option("--sleep", is_flag=True, help="1 ms I/O-sleep jobs instead of no-op.")
@click.option("--monitor", is_flag=True,
              help="Count top-level and in-Lua commands with MONITOR (slows Redis down).")
@click.option("--job-logs/--no-job-logs", default=True, show_default=True,
              help="The per-job start/done INFO lines (rfetch's default), or none "
                   "(-r benchmarks.peers.rfetch_quiet: logger rfetch.job at WARNING).")
@click.option("--python", "python", default=None,
              help="Interpreter for client and worker. [default: the peers' venv, else this]")
@click.argument("worker_args", nargs=-1)
def main(jobs: int, concurrency: int, runs: int, sleep: bool, monitor: bool, job_logs: bool,
         python: str | None, worker_args: tuple[str, ...]) -> None:
    """Measure rfetch's drain rate; WORKER_ARGS go to `rfetch worker`."""
    if not job_logs:
        worker_args = ("-r", "benchmarks.peers.rfetch_quiet", *worker_args)
    rt = Runtime(python or (str(PEERS_PYTHON) if PEERS_PYTHON.exists() else sys.executable))
    logs = RESULTS / f"rfetch-drain-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    bench = Bench(RfetchWithArgs(worker_args), rt, logs, limit=600)
    results = []
    for i in range(1, runs + 1):
        res = bench.drain("sleep" if sleep else "noop", jobs, concurrency, monitor)
        results.append(res)
        line = (f"run {i}: steady {res['steady']:,.0f} jobs/s, bulk enqueue {res['bulk']:,.0f} "
                f"jobs/s, peak RSS {res['rss_mb']:.1f} MB, commands/job {res['cmds_per_job']:.3f}, "
                f"worker CPU {res['cpu_us_per_job']:.1f} us/job, bulk enqueue CPU "
                f"{res['bulk_cpu_us_per_job']:.2f} us/job, load {load()}")
        if "monitor" in res:
            m = res["monitor"]
            line += f" (top-level {m['top_per_job']:.3f}, in Lua {m['lua_per_job']:.3f})"
        click.echo(line)
    click.echo(f"median steady jobs/s: {statistics.median(r['steady'] for r in results):,.0f}; "
               f"median bulk enqueue jobs/s: "
               f"{statistics.median(r['bulk'] for r in results):,.0f}; "
               f"max peak RSS MB: {max(r['rss_mb'] for r in results):.1f}")
    click.echo(f"commands (last run, less the jobs' INCRBY and the harness): "
               f"{results[-1]['commands']}")
    if "monitor" in results[-1]:
        click.echo(f"top-level: {results[-1]['monitor']['top']}")
        click.echo(f"in Lua: {results[-1]['monitor']['lua']}")


if __name__ == "__main__":
    main()
