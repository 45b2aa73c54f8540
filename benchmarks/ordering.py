"""Evidence for ordering keys and fair tenants: order per key under chaos, fairness across
tenants, and the throughput cost of ordered and fair modes. Starts its own redis-server and real
``rfetch worker`` processes; every figure is computed from the evidence files the jobs
write (``tests/jobs/chaos_jobs.py``, ``tests/jobs/ordered_jobs.py``), not from Redis.

    python -m benchmarks.ordering                     # all three parts, the issue's sizes
    python -m benchmarks.ordering --parts order --keys 50 --per-key 20   # a quick look

(a) order: ``keys x per_key`` jobs, ``workers`` processes x ``concurrency`` threads, a
    random worker SIGKILLed every ``kill_every`` s (replacement started), 10% failing once:
    first successful runs in enqueue order per key, no overlap, 0 lost.
(b) fairness: tenant A pushes 5,000 jobs, then B pushes one every 0.25 s: job starts
    before B's and B's wait, fair vs FIFO; then 100 tenants with unequal load (tenant i
    pushes max(5, 2000 / (i + 1)) jobs, tenant by tenant): Jain's fairness index of job
    starts per tenant over the first 1,000 starts, among tenants still backlogged then.
(c) throughput: 20,000 no-op jobs drained by one worker x 10 threads, plain vs ordered
    (1,000 keys) vs fair (100 tenants); the ratio to plain.
Only processes this script started are signalled, by their own PID.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
from pathlib import Path

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.ordering_run import FAST_ENV, OrderPlan, run_order_chaos
from tests.support.redis_server import RedisServer
from tests.support.workers import WorkerProcess


def read_events(directory: Path, event: str) -> list[tuple[float, str]]:
    """(time, jid) of every ``event`` line, sorted by time."""
    found = []
    for path in directory.glob("*.log"):
        for line in path.read_text().splitlines():
            parts = line.split(" ")
            if len(parts) >= 4 and parts[0] == event:
                found.append((float(parts[3]), parts[1]))
    return sorted(found)


def worker(url: str, evidence: Path, concurrency: int, *extra: str) -> WorkerProcess:
    return WorkerProcess(
        url,
        ["-r", "chaos_jobs", "-c", str(concurrency), *extra],
        env={**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence)},
        log_dir=evidence.parent,
    )


def wait_events(directory: Path, event: str, count: int, timeout: float) -> list[tuple[float, str]]:
    deadline = time.monotonic() + timeout
    while True:
        found = read_events(directory, event)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def stop(proc: WorkerProcess) -> None:
    proc.signal(signal.SIGTERM)
    proc.wait(60)


def fresh_dir(base: Path, name: str) -> Path:
    """``base/<name>-<n>/evidence``, a new folder each call."""
    n = 1
    while (base / f"{name}-{n}").exists():
        n += 1
    path = base / f"{name}-{n}" / "evidence"
    path.mkdir(parents=True)
    return path


def jain(values: list[int]) -> float:
    """Jain's fairness index: (sum x)^2 / (n * sum x^2); 1 = equal shares, 1/n = one takes all."""
    squares = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * squares) if squares else 1.0


# -- (a) ---------------------------------------------------------------------------------


def part_order(server: RedisServer, base: Path, plan: OrderPlan) -> None:
    print(f"\n(a) order: {plan.keys} keys x {plan.per_key} jobs, {plan.workers} workers x "
          f"{plan.concurrency} threads, SIGKILL every {plan.kill_every} s, "
          f"{plan.fail_ratio:.0%} fail once")
    server.client().flushall()
    result = run_order_chaos(server.url, base / "order", plan, lambda s: print("   ", s))
    print("   ", result.summary())
    report = result.report
    print(f"    lost: {len(report.lost)}; keys whose first successful runs are out of enqueue "
          f"order: {len(report.out_of_order)}; overlapping runs of one key: "
          f"{len(report.overlaps)}; drained: {result.drained}")


# -- (b) ---------------------------------------------------------------------------------


def b_wait(server: RedisServer, base: Path, fair: bool) -> tuple[int, list[float]]:
    """A pushes 5,000 (5 ms each), then B pushes 1 every 0.25 s, 8 times."""
    server.client().flushall()
    mode = "fair" if fair else "fifo"
    evidence = fresh_dir(base, f"wait-{mode}")
    client = Client(Config(redis_url=server.url))
    proc = worker(server.url, evidence, 10)
    try:
        client.push_bulk("chaos_jobs.Work", [[5]] * 5000, {"tenant": "A"} if fair else {})
        wait_events(evidence, "start", 50, 60)
        pushes: list[tuple[float, str]] = []
        for _ in range(8):
            at = time.time()
            jid = client.push("chaos_jobs.Work", [5], {"tenant": "B"} if fair else {})
            assert jid is not None
            pushes.append((at, jid))
            time.sleep(0.25)
        wait_events(evidence, "done", 5008, 300)
    finally:
        stop(proc)
    starts = read_events(evidence, "start")
    start_of = {j: t for t, j in starts}
    waits = [start_of[j] - at for at, j in pushes]
    first_at, first_jid = pushes[0]
    before = sum(1 for t, _ in starts if first_at <= t < start_of[first_jid])
    return before, waits


def b_jain(server: RedisServer, base: Path, fair: bool) -> tuple[float, int, int]:
    server.client().flushall()
    mode = "fair" if fair else "fifo"
    evidence = fresh_dir(base, f"jain-{mode}")
    client = Client(Config(redis_url=server.url))
    tenant_of: dict[str, int] = {}
    load = {i: max(5, 2000 // (i + 1)) for i in range(100)}
    for i, n in load.items():
        jids = client.push_bulk("chaos_jobs.Work", [[1]] * n, {"tenant": f"t{i}"} if fair else {})
        tenant_of.update({j: i for j in jids})
    total = sum(load.values())
    proc = worker(server.url, evidence, 10)
    try:
        wait_events(evidence, "done", total, 600)
    finally:
        stop(proc)
    window = read_events(evidence, "start")[:1000]
    slots = {i: 0 for i in load}
    for _, jid in window:
        slots[tenant_of[jid]] += 1
    backlogged = [i for i in load if load[i] > slots[i]]
    return jain([slots[i] for i in backlogged]), len(backlogged), total


def part_fairness(server: RedisServer, base: Path) -> None:
    print("\n(b) fairness: one worker x 10 threads (prefetch 10)")
    for fair in (True, False):
        before, waits = b_wait(server, base, fair)
        mode = "fair (tenants A, B)" if fair else "FIFO (one plain queue)"
        print(f"    {mode}: A pushed 5,000 then B 8 jobs 0.25 s apart: {before} job starts "
              f"between B's first push and its start (bound: 2 tenants x 10 threads + "
              f"prefetch 10 held = 30); B's wait max {max(waits):.3f} s, median "
              f"{statistics.median(waits):.3f} s")
    for fair in (True, False):
        index, n, total = b_jain(server, base, fair)
        mode = "fair" if fair else "FIFO"
        print(f"    {mode}: 100 tenants, {total} jobs (tenant i: max(5, 2000/(i+1))), pushed "
              f"tenant by tenant: Jain's index over the first 1,000 starts, {n} tenants "
              f"still backlogged: {index:.3f}")


# -- (c) ---------------------------------------------------------------------------------


def drain_rate(server: RedisServer, base: Path, mode: str, jobs: int) -> float:
    server.client().flushall()
    evidence = fresh_dir(base, f"drain-{mode}")
    client = Client(Config(redis_url=server.url))
    if mode == "plain":
        client.push_bulk("chaos_jobs.Tick", [[]] * jobs)
    elif mode == "ordered":
        client.push_bulk("chaos_jobs.Tick", [[i] for i in range(jobs)], {},
                         options_for=lambda args: {"key": f"k{args[0] % 1000}"})
    else:
        client.push_bulk("chaos_jobs.Tick", [[i] for i in range(jobs)], {},
                         options_for=lambda args: {"tenant": f"t{args[0] % 100}"})
    proc = worker(server.url, evidence, 10)
    try:
        dones = wait_events(evidence, "done", jobs, 600)
    finally:
        stop(proc)
    assert len(dones) >= jobs, f"{mode}: only {len(dones)} of {jobs} done"
    return (len(dones) - 1) / (dones[-1][0] - dones[0][0])


def part_throughput(server: RedisServer, base: Path, jobs: int, runs: int) -> None:
    print(f"\n(c) throughput: {jobs} no-op jobs, one worker x 10 threads, median of {runs}")
    rates = {}
    for mode in ("plain", "ordered", "fair"):
        values = [drain_rate(server, base, mode, jobs) for _ in range(runs)]
        rates[mode] = statistics.median(values)
        print(f"    {mode:8s} {rates[mode]:8.0f} jobs/s  (runs: "
              f"{', '.join(f'{v:.0f}' for v in values)})  ratio to plain "
              f"{rates[mode] / rates['plain']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="order,fairness,throughput")
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--per-key", type=int, default=100)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--kill-every", type=float, default=3.0)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    base = Path(tempfile.mkdtemp(prefix="rfetch-ordering-"))
    server = RedisServer()
    server.start()
    print(f"redis-server {server.url}; evidence under {base}")
    try:
        if "order" in parts:
            plan = OrderPlan(keys=args.keys, per_key=args.per_key, workers=args.workers,
                             concurrency=args.concurrency, kill_every=args.kill_every,
                             timeout=1800.0)
            part_order(server, base, plan)
        if "fairness" in parts:
            part_fairness(server, base)
        if "throughput" in parts:
            part_throughput(server, base, args.jobs, args.runs)
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
