"""Whether and when the default worker spreads over every CPU: adaptive affinity on a real
process (``rfetch.worker.adaptive_affinity``).

    python -m benchmarks.affinity_spread [--workloads hash,child,sleep] [-c 4] [--jobs 400]
        [--limit 60] [--runs 1] [--check]

For each workload and run: a fresh redis-server and one ``rfetch worker -c C -v`` (the
default, ``--cpu-affinity adaptive``), ``--jobs`` jobs pushed at once, then the worker's log
and the affinity of every one of its threads (``/proc/<pid>/task/*/status``) watched every
0.1 s until it spreads, its jobs are done, or ``--limit`` seconds pass. Per run it prints the
CPU the worker started on, when (seconds after the push) it first probed every CPU and how
many probes it made, when it spread and the CPUs the deciding probe measured (spread and
pinned; or, when it stayed, what its last probe measured), whether every thread was then on
every allowed CPU, and the load average.

The workloads, and what each should do when a second CPU has time to spare:

* ``hash``: SHA-256 of a ``--hash-mb`` (64) MB buffer (``bench_jobs.HashBuffer``); hashlib
  releases the GIL, so the jobs run on several CPUs at once: **spread**;
* ``child``: 0.3 s of CPU in a subprocess (``bench_jobs.ChildBurn``), counted as the
  worker's own: **spread**;
* ``sleep``: ``time.sleep(0.1)`` (``bench_jobs.ThreadWait``), little CPU: **stays** on its
  CPU after its probes.

A spread needs an idle CPU: when others keep every CPU busy, the probe gains too little and
staying is the right call. So this is measured here on a quiet machine, not asserted by the
test suite, which checks what holds under load (``tests/integration/test_affinity_worker.py``:
the worker starts pinned, probes, and stays with sleeping jobs; the policy is unit-tested
with fake clocks). ``--check`` exits 1 unless every run did what its workload should.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from benchmarks.common import HERE, RESULTS, PrivateRedis, env_with, stop_group
from rfetch.config import Config
from rfetch.push.client import Client

WORKLOADS = {"hash": ("HashBuffer", True), "child": ("ChildBurn", True),
             "sleep": ("ThreadWait", False)}
"""name -> (job class in ``bench_jobs``, whether it should spread)."""

PLACED = re.compile(r"cpu affinity: (\S+) \((.*)\)")
SPREAD = re.compile(r"adaptive affinity: spread over CPUs (\S+) \(a busy window used "
                    r"([\d.]+) CPUs spread, ([\d.]+) pinned\)")
STAYED = re.compile(r"adaptive affinity: stays on CPUs \S+ \(([\d.]+) CPUs used spread, "
                    r"([\d.]+) pinned")
PROBE = "adaptive affinity: probing CPUs"


@dataclass
class Outcome:
    """What one run saw; times are seconds after the push (``None``: did not happen)."""

    start_cpu: str = "?"
    first_probe: float | None = None
    probes: int = 0
    spread_at: float | None = None
    measured: str = "-"
    threads_spread: bool | None = None
    done: int = 0
    load: str = ""


def thread_cpus(pid: int) -> set[str]:
    """The ``Cpus_allowed_list`` values of the threads of ``pid`` (empty once it ended)."""
    found: set[str] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            match = re.search(r"^Cpus_allowed_list:\s*(\S+)$", (task / "status").read_text(),
                              re.M)
        except OSError:
            continue
        if match:
            found.add(match[1])
    return found


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def run_once(kind: str, concurrency: int, jobs: int, limit: float, hash_mb: int,
             logs: Path) -> Outcome:
    """One worker, one workload; see the module docstring."""
    job, _ = WORKLOADS[kind]
    server = PrivateRedis()
    log_path = logs / f"worker-{kind}-{int(time.time() * 1000)}.log"
    env = env_with(server.url, PYTHONPATH=str(HERE), BENCH_HASH_MB=str(hash_mb))
    outcome = Outcome()
    with log_path.open("wb") as log_file:
        worker = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "worker", "-r", "bench_jobs",
             "-c", str(concurrency), "-v"],
            env=env, cwd=HERE, stdout=log_file, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while not (placed := PLACED.search(log_path.read_text())):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise click.ClickException(f"the worker did not start; see {log_path}")
            time.sleep(0.1)
        outcome.start_cpu = placed[1]
        client = Client(Config(redis_url=server.url))
        client.push_bulk(f"bench_jobs.{job}", [[i] for i in range(jobs)])
        pushed = time.monotonic()
        while time.monotonic() - pushed < limit and worker.poll() is None:
            text = log_path.read_text()
            now = time.monotonic() - pushed
            outcome.probes = text.count(PROBE)
            if outcome.probes and outcome.first_probe is None:
                outcome.first_probe = now
            outcome.done = int(server.client.get("bench:done") or 0)
            spread = SPREAD.search(text)
            if spread:
                outcome.spread_at = now
                outcome.measured = f"{spread[2]} spread / {spread[3]} pinned"
                outcome.threads_spread = thread_cpus(worker.pid) == {spread[1]}
                break
            stayed = STAYED.findall(text)
            if stayed:
                outcome.measured = f"stayed: {stayed[-1][0]} spread / {stayed[-1][1]} pinned"
            if outcome.done >= jobs:
                break
            time.sleep(0.1)
        outcome.load = load()
        return outcome
    finally:
        stop_group(worker)
        server.close()


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--workloads", default="hash,child,sleep", show_default=True,
              help="Comma-separated: hash, child, sleep.")
@click.option("--concurrency", "-c", default=4, show_default=True, help="Worker threads.")
@click.option("--jobs", default=400, show_default=True, help="Jobs pushed per run.")
@click.option("--limit", default=60.0, show_default=True,
              help="Seconds to watch a run after the push.")
@click.option("--runs", default=1, show_default=True, help="Runs per workload.")
@click.option("--hash-mb", default=64, show_default=True, help="Buffer hashed per hash job.")
@click.option("--check", is_flag=True,
              help="Exit 1 unless every run spread or stayed as its workload should.")
def main(workloads: str, concurrency: int, jobs: int, limit: float, runs: int, hash_mb: int,
         check: bool) -> None:
    """Report whether and when the default worker spreads over every CPU."""
    kinds = [k.strip() for k in workloads.split(",") if k.strip()]
    if not kinds or any(k not in WORKLOADS for k in kinds):
        raise click.BadParameter(f"choose among {', '.join(WORKLOADS)}",
                                 param_hint="--workloads")
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        raise click.ClickException("needs Linux and at least two CPUs this process may use")
    logs = RESULTS / f"affinity-spread-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    click.echo(f"{os.cpu_count()} CPUs, load average {load()} at the start; worker logs in "
               f"{logs}\n")
    click.echo("| workload | run | started on | first probe (s) | probes | spread at (s) | "
               "CPUs used (deciding or last probe) | every thread spread | jobs done | expected | "
               "load average at the end |")
    click.echo("|---|---:|---|---:|---:|---:|---|---|---:|---|---|")
    missed = 0
    for kind in kinds:
        should_spread = WORKLOADS[kind][1]
        for run in range(1, runs + 1):
            res = run_once(kind, concurrency, jobs, limit, hash_mb, logs)
            spread = res.spread_at is not None
            ok = spread == should_spread and res.threads_spread is not False
            ok = ok and (spread or res.probes > 0)
            missed += not ok
            threads = "-" if res.threads_spread is None else ("yes" if res.threads_spread
                                                              else "no")
            click.echo(
                f"| {kind} | {run} | CPU {res.start_cpu} | {_seconds(res.first_probe)} | "
                f"{res.probes} | {_seconds(res.spread_at)} | {res.measured} | {threads} | "
                f"{res.done:,} | {'spread' if should_spread else 'stay'}: "
                f"{'met' if ok else 'MISSED'} | {res.load} |")
    if check and missed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
