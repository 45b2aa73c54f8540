"""Idle latency per queue of a worker of three queues: how soon a job pushed to an idle
worker's second or third queue starts, against its first.

Each round starts its own redis-server and one ``rfetch worker -q first -q second -q third``
(``-c 10``, the defaults otherwise) of the rfetch installed in a venv, then pushes single
``bench_jobs.Latency`` jobs with that venv's client (its own push scripts), one after
another with a random idle gap (``--gap-min``..``--gap-max`` seconds) before each, in turn
to each queue, and waits for each to start. A job's latency is the time from just before
its push to the start of its ``perform`` (both ``time.time()`` on this machine), as the
peer benchmark's idle probe measures it. After the jobs, the worker idles ``--idle``
seconds and every Redis command in that window is counted (INFO commandstats, this
script's own INFO taken out): the idle cost.

Rounds alternate between the venvs given (old, new, old, new, ...) so that both see the
same load; the load average is printed per round.

    python -m benchmarks.queue_latency --venv old=/tmp/main-venv --venv new=/tmp/branch-venv
    python -m benchmarks.queue_latency --venv new=.venv --rounds 1 --n 30

Only the processes this script started are stopped, by their process group.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path

from benchmarks.common import HERE, PrivateRedis, command_counts, stop_group

QUEUES = ("first", "second", "third")


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def run(venv: Path, options: argparse.Namespace, seed: int) -> dict[str, list[float]]:
    """One round: latencies (ms) per queue, and ``"idle"``: [commands/s while idle]."""
    with PrivateRedis() as server:
        env = dict(os.environ, REDIS_URL=server.url, PYTHONPATH=str(HERE))
        env.pop("VIRTUAL_ENV", None)
        queues = [arg for q in QUEUES for arg in ("-q", q)]
        log = (options.logs / f"worker-{venv.name}-{seed}.log").open("wb")
        worker = subprocess.Popen(
            [str(venv / "bin" / "rfetch"), "worker", "-r", "bench_jobs", "-c", "10", *queues],
            env=env, cwd=HERE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not server.client.scard("processes"):
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not start; see {log.name}")
                time.sleep(0.1)
            subprocess.run(
                [str(venv / "bin" / "python"), "queue_latency_client.py", server.url,
                 str(options.warm), str(options.n * len(QUEUES)), str(options.gap_min),
                 str(options.gap_max), str(seed), *QUEUES],
                env=env, cwd=HERE, check=True, timeout=1800,
            )
            rows = server.client.lrange("bench:latdone", 0, -1)
            names = server.client.lrange("bench:latq", 0, -1)
            out: dict[str, list[float]] = {q: [] for q in QUEUES}
            for row, name in list(zip(rows, names, strict=True))[options.warm:]:
                pushed, started = (float(x) for x in row.split())
                out[name.decode()].append((started - pushed) * 1000)
            before = command_counts(server.client)
            time.sleep(options.idle)
            after = command_counts(server.client)
            calls = sum(after.values()) - sum(before.values()) - 1  # the second INFO
            out["idle"] = [calls / options.idle]
            return out
        finally:
            stop_group(worker)
            log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", action="append", required=True,
                        help="label=path of a venv with rfetch installed (repeatable)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per venv")
    parser.add_argument("--n", type=int, default=40, help="jobs per queue per round")
    parser.add_argument("--warm", type=int, default=3, help="jobs not counted, first")
    parser.add_argument("--gap-min", type=float, default=0.1)
    parser.add_argument("--gap-max", type=float, default=0.6)
    parser.add_argument("--idle", type=float, default=20.0,
                        help="seconds of idle whose Redis commands are counted")
    options = parser.parse_args()
    venvs = [(label, Path(path).resolve()) for label, path in
             (item.split("=", 1) for item in options.venv)]
    options.logs = HERE / "results" / f"queue-latency-{time.strftime('%Y%m%d-%H%M%S')}"
    options.logs.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} CPUs; worker -q first -q second -q third -c 10; {options.n} jobs "
          f"per queue per round, gaps {options.gap_min}-{options.gap_max} s; logs {options.logs}")
    print("| round | rfetch | load | first p50/p99 ms | second p50/p99 ms | third p50/p99 ms "
          "| idle commands/s |")
    print("|---|---|---|---|---|---|---|")
    summary: dict[str, dict[str, list[float]]] = {label: {} for label, _ in venvs}
    for index in range(options.rounds):
        for label, venv in venvs:
            load = os.getloadavg()[0]
            got = run(venv, options, seed=42 + index)
            cells = [f"{pct(got[q], 50):.2f} / {pct(got[q], 99):.2f}" for q in QUEUES]
            print(f"| {index + 1} | {label} | {load:.2f} | {' | '.join(cells)} "
                  f"| {got['idle'][0]:.2f} |", flush=True)
            for key, values in got.items():
                summary[label].setdefault(key, []).extend(values)
    print()
    for label, got in summary.items():
        cells = [f"{q} p50 {pct(got[q], 50):.2f} p99 {pct(got[q], 99):.2f} ms" for q in QUEUES]
        print(f"{label}, all rounds: {'; '.join(cells)}; idle "
              f"{statistics.mean(got['idle']):.2f} commands/s")


if __name__ == "__main__":
    main()
