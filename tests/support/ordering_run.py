"""One ordered-jobs chaos run, shared by ``tests/chaos/test_ordering_chaos.py``
and ``benchmarks/ordering.py``.

Pushes ``keys x per_key`` jobs of ``ordered_jobs.Ordered`` (a share of them failing once),
runs real ``rfetch worker`` processes, SIGKILLs a random one every ``kill_every`` seconds
(starting a replacement each time) until every job has succeeded, stops the rest with
TERM, and checks the jobs' evidence with :func:`tests.support.ordering_check.check_order`.
Only processes this run started are signalled, each by its own PID.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.ordering_check import OrderReport, check_order, read_runs
from tests.support.workers import FAST_ENV, WorkerProcess


@dataclass
class OrderPlan:
    """Sizes of one run."""

    keys: int = 200
    per_key: int = 100
    workers: int = 4
    concurrency: int = 10
    kill_every: float = 3.0
    fail_ratio: float = 0.1
    job_ms: float = 1.0
    timeout: float = 600.0
    seed: int = 5


@dataclass
class OrderResult:
    """What a run did and found."""

    report: OrderReport
    kills: dict[int, float] = field(default_factory=dict)
    failing: int = 0
    elapsed: float = 0.0
    drained: bool = False
    gate_left: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        return (
            f"{self.report.summary()}; {len(self.kills)} SIGKILLs; {self.failing} jobs set to "
            f"fail once; {self.elapsed:.1f} s; gate keys left: {self.gate_left or 'none'}"
        )


def run_order_chaos(
    url: str, work_dir: Path, plan: OrderPlan, say: Callable[[str], None] = print
) -> OrderResult:
    """Run the plan against the Redis at ``url``; evidence and logs go under ``work_dir``."""
    rng = random.Random(plan.seed)
    evidence = work_dir / "evidence"
    evidence.mkdir(parents=True, exist_ok=True)
    client = Client(Config(redis_url=url))
    pushed: dict[str, list[str]] = {}
    failing = 0
    # Keys interleaved, as producers of many posts would push.
    for seq in range(plan.per_key):
        for k in range(plan.keys):
            key = f"k{k}"
            fail = rng.random() < plan.fail_ratio
            failing += fail
            jid = client.push(
                "ordered_jobs.Ordered", [key, seq, plan.job_ms, fail], {"key": key}
            )
            assert jid is not None
            pushed.setdefault(key, []).append(jid)
    total = plan.keys * plan.per_key
    say(f"pushed {total} jobs over {plan.keys} keys ({failing} fail once)")

    def start() -> WorkerProcess:
        return WorkerProcess(
            url,
            ["-r", "ordered_jobs", "-c", str(plan.concurrency)],
            env={**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence)},
            log_dir=work_dir,
        )

    workers = [start() for _ in range(plan.workers)]
    kills: dict[int, float] = {}
    began = time.monotonic()
    next_kill = began + plan.kill_every
    drained = False
    every = {jid for jids in pushed.values() for jid in jids}
    try:
        while time.monotonic() - began < plan.timeout:
            time.sleep(0.25)
            done = {run.jid for run in read_runs(evidence) if run.outcome == "done"}
            if every <= done:
                drained = True
                break
            if time.monotonic() >= next_kill and len(done) < 0.9 * total:
                victim = rng.choice(workers)
                kills[victim.pid] = time.time()
                victim.kill()
                workers.remove(victim)
                workers.append(start())
                next_kill = time.monotonic() + plan.kill_every
                say(f"SIGKILL worker {victim.pid} at {len(done)}/{total} done")
    finally:
        for w in workers:
            w.signal(signal.SIGTERM)
        for w in workers:
            w.wait(60)
    elapsed = time.monotonic() - began
    report = check_order(read_runs(evidence), pushed, kills)
    r = redis.Redis.from_url(url)
    gate_left = {
        "holders": int(r.hlen("rfetch:key-holders:default")),
        "key lists": len(list(r.scan_iter(match="rfetch:key:*"))),
    }
    r.close()
    return OrderResult(
        report, kills, failing, elapsed, drained, {k: v for k, v in gate_left.items() if v}
    )
