"""asyncio jobs: 10,000 jobs that each wait 100 ms (``await asyncio.sleep(0.1)``), drained by
one worker process, for rfetch's event loop, rfetch's threads and arq, in one run.

    python -m benchmarks.async_sleep [--jobs 10000] [--async-concurrency 1000] [--runs 1]
        [-c 10] [--only async,threads,arq]

- rfetch async: ``rfetch worker -r benchmarks.async_jobs -c C --async-concurrency N`` runs
  ``OnlyAsyncWait`` (an ``async def perform``) on its event loop thread: a worker whose only
  class is async, with ``-c 10`` threads beside the loop, as the peer benchmark's
  ``rfetch_async_jobs`` worker;
- rfetch threads: the same wait as ``time.sleep(0.1)`` in ``ThreadWait``, at ``-c 50``
  (so at most 500 jobs/s: the figure says what an async job saves);
- arq: ``wait100`` with ``max_jobs`` = N (arq's own concurrency setting, tuned to the same
  value) and a 10 ms poll.

Each run fills the queue with the framework's client (rfetch ``perform_bulk``, an arq
``enqueue_job`` loop), then starts one worker on a fresh private redis-server; steady jobs/s
between 10 % and 90 % done (``benchmarks.harness``). arq must be importable by the
interpreter (``benchmarks/setup_peers.sh``, or ``pip install --no-deps arq``); it is skipped
with a line saying so otherwise.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Sequence

import click

from benchmarks.common import RESULTS
from benchmarks.compare import Bench
from benchmarks.peers.arq import ArqPeer
from benchmarks.peers.base import Runtime
from benchmarks.rfetch_drain import RfetchWithArgs


class RfetchAsyncOnly(RfetchWithArgs):
    """The worker loads ``benchmarks.async_jobs`` (async classes only) instead of
    ``benchmarks.bench_jobs``."""

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        argv = super().worker_argv(rt, concurrency, queues)
        return [("benchmarks.async_jobs" if a == "benchmarks.bench_jobs" else a) for a in argv]


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=10_000, show_default=True)
@click.option("--async-concurrency", default=1000, show_default=True,
              help="rfetch --async-concurrency and arq max_jobs.")
@click.option("--threads", default=50, show_default=True, help="-c of the threads variant.")
@click.option("--concurrency", "-c", default=10, show_default=True,
              help="-c of the async variant (its processor threads, beside the loop).")
@click.option("--only", default="async,threads,arq", show_default=True,
              help="Variants to run, comma-separated: async, threads, arq.")
@click.option("--runs", default=1, show_default=True)
@click.option("--python", "python", default=None, help="Interpreter. [default: this one]")
def main(jobs: int, async_concurrency: int, threads: int, concurrency: int, only: str,
         runs: int, python: str | None) -> None:
    """Jobs/s of 100 ms asyncio waits: rfetch async, rfetch threads, arq."""
    rt = Runtime(python or sys.executable)
    logs = RESULTS / f"async-sleep-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    chosen = set(only.split(","))
    variants: list[tuple[str, Bench, str, int]] = []
    if "async" in chosen:
        variants.append(
            (f"rfetch async (-c {concurrency} --async-concurrency {async_concurrency})",
             Bench(RfetchAsyncOnly(["--async-concurrency", str(async_concurrency)]), rt, logs,
                   limit=600), "wait100-only", concurrency))
    if "threads" in chosen:
        variants.append((f"rfetch threads (-c {threads})",
                         Bench(RfetchWithArgs([]), rt, logs, limit=600), "wait100-thread",
                         threads))
    arq = ArqPeer()
    if "arq" not in chosen:
        pass
    elif arq.version(rt) is None:
        click.echo("arq: not installed for this interpreter, skipped")
    else:
        variants.append((f"arq {arq.version(rt)} (max_jobs {async_concurrency})",
                         Bench(arq, rt, logs, limit=600), "wait100", async_concurrency))
    rates: dict[str, list[float]] = {name: [] for name, *_ in variants}
    for i in range(1, runs + 1):
        for name, bench, kind, concurrency in variants:
            result = bench.drain(kind, jobs, concurrency)
            rates[name].append(result["steady"])
            click.echo(f"run {i} {name}: {result['steady']:,.0f} jobs/s "
                       f"(peak RSS {result['rss_mb']:.1f} MB, Redis commands/job "
                       f"{result['cmds_per_job']:.2f}, load {' '.join(_loadavg())})")
    click.echo("")
    click.echo("| | jobs/s (median) |")
    click.echo("|---|---|")
    for name, values in rates.items():
        click.echo(f"| {name} | {statistics.median(values):,.0f} |")


def _loadavg() -> list[str]:
    with open("/proc/loadavg") as f:
        return f.read().split()[:3]


if __name__ == "__main__":
    main()
