"""The per-job cost of the OpenTelemetry middleware: the no-op drain of
``benchmarks.rfetch_drain`` by one worker, without and with ``-r benchmarks.otel_setup``,
alternated in one sitting.

    python -m benchmarks.otel_cost [--jobs 20000] [-c 10] [--runs 3]

The jobs are filled by the benchmark client without the client middleware, so the payloads
carry no trace context: each run costs a consumer span without a link (extracting an absent
context), which is within a few microseconds of one with a link. Needs the ``otel`` extra in
the interpreter that runs the worker (``--python``, default: this one).
"""

from __future__ import annotations

import statistics
import sys
import time

import click

from benchmarks.common import RESULTS
from benchmarks.compare import Bench
from benchmarks.peers.base import Runtime
from benchmarks.rfetch_drain import RfetchWithArgs


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=20_000, show_default=True)
@click.option("--concurrency", "-c", default=10, show_default=True)
@click.option("--runs", default=3, show_default=True)
@click.option("--python", "python", default=None, help="Interpreter. [default: this one]")
def main(jobs: int, concurrency: int, runs: int, python: str | None) -> None:
    """Steady jobs/s without and with the OpenTelemetry middleware."""
    rt = Runtime(python or sys.executable)
    logs = RESULTS / f"otel-cost-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    variants = {
        "without": Bench(RfetchWithArgs([]), rt, logs, limit=600),
        "with OpenTelemetry": Bench(RfetchWithArgs(["-r", "benchmarks.otel_setup"]), rt, logs,
                                    limit=600),
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for i in range(1, runs + 1):
        for name, bench in variants.items():
            rate = bench.drain("noop", jobs, concurrency)["steady"]
            rates[name].append(rate)
            click.echo(f"run {i} {name}: {rate:,.0f} jobs/s")
    without = statistics.median(rates["without"])
    with_otel = statistics.median(rates["with OpenTelemetry"])
    added_us = (1 / with_otel - 1 / without) * 1e6
    click.echo(f"median: {without:,.0f} jobs/s without, {with_otel:,.0f} jobs/s with "
               f"OpenTelemetry ({with_otel / without:.2f}x); added cost per job "
               f"{added_us:.0f} us of the worker's time")


if __name__ == "__main__":
    main()
