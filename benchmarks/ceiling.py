"""The drain's ceiling: what the benchmark job alone costs, with no framework at all.

    python -m benchmarks.ceiling [--jobs 20000] [-c 10] [--runs 3] [--pin 1]

Every framework's no-op job does one ``INCRBY bench:done 1`` through redis-py
(``benchmarks/bench_jobs.py`` and ``benchmarks/peers/*_jobs.py``). Here C plain threads do
just that, N times in all, against a fresh private redis-server, in the peers' virtualenv
(the same redis-py and hiredis the Python frameworks run with). No Python framework can
drain N no-op jobs at -c C faster than this on the same machine: it is the job's own round
trip and the GIL hand-offs around it, with nothing fetched. The performance notes compare each
framework's steady jobs/s with this figure.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

import click

from benchmarks.common import PrivateRedis
from benchmarks.compare import PEERS_PYTHON

PROGRAM = """
import sys, threading, time, redis
url, jobs, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = redis.Redis.from_url(url)
client.ping()
def run(count):
    for _ in range(count):
        client.incrby("bench:done", 1)
workers = [threading.Thread(target=run, args=(jobs // threads,)) for _ in range(threads)]
started = time.perf_counter()
for w in workers:
    w.start()
for w in workers:
    w.join()
print(jobs // threads * threads / (time.perf_counter() - started))
"""


@click.command()
@click.option("--jobs", default=20_000, show_default=True, help="INCRBY calls in all.")
@click.option("-c", "--concurrency", default=10, show_default=True, help="Threads.")
@click.option("--runs", default=3, show_default=True, help="Runs; the median is printed.")
@click.option("--python", default=str(PEERS_PYTHON), show_default=True,
              help="Interpreter (with redis-py) to run the threads in.")
@click.option("--pin", default="1", show_default=True, metavar="CPUS",
              help="CPU list for the one-CPU measurement (taskset -c); '' skips it.")
def main(jobs: int, concurrency: int, runs: int, python: str, pin: str) -> None:
    """Print the bare job's jobs/s: C threads doing INCRBY with redis-py, no framework."""
    placements = [("spread by the kernel", [])]
    if pin:
        placements.append((f"on CPU {pin}", ["taskset", "-c", pin]))
    for where, prefix in placements:
        rates = []
        for run in range(1, runs + 1):
            with PrivateRedis() as server:
                out = subprocess.run(
                    [*prefix, python, "-c", PROGRAM, server.url, str(jobs), str(concurrency)],
                    check=True, capture_output=True, text=True, timeout=600,
                )
            rate = float(out.stdout.strip())
            rates.append(rate)
            click.echo(f"run {run} ({where}): {rate:,.0f} INCRBY/s from {concurrency} threads")
        click.echo(f"ceiling, threads {where} (median of {runs}): "
                   f"{statistics.median(rates):,.0f} jobs/s ({jobs:,} INCRBY, {concurrency} "
                   f"threads, {python})")


if __name__ == "__main__":
    sys.exit(main())
