"""What one ``within_limit`` call costs, per limiter kind.

    python -m benchmarks.limiter_cost [--calls 2000]

On a private redis-server (no persistence), one thread makes ``--calls`` granted
``within_limit`` calls per kind (limits far above the calls, so none waits), then the same
number of refused calls (a spent limiter, ``wait_timeout=0``: ``OverLimit`` at once), and
reports per call:

* round trips: commands the client sent (a counting ``redis.Redis`` subclass);
* commands Redis ran: ``INFO commandstats`` deltas, the harness's own INFO left out; the
  scripts' inner commands are counted there too, the EVALSHA itself apart;
* microseconds per call (wall clock, one thread; a figure for this machine only).

The scripts are loaded before measuring (the first EVALSHA of a fresh server costs a
SCRIPT LOAD more).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import click
import redis

from benchmarks.common import PrivateRedis, command_counts, diff_counts
from rfetch.config import Config
from rfetch.errors import OverLimit
from rfetch.limiter import Limiter
from rfetch.push.client import Client


class CountingRedis(redis.Redis):
    """Counts the commands sent (each one round trip: nothing here pipelines)."""

    sent = 0

    def execute_command(self, *args: Any, **options: Any) -> Any:
        CountingRedis.sent += 1
        return super().execute_command(*args, **options)


KINDS: dict[str, Callable[[Client, bool], Limiter]] = {
    "window": lambda c, spent: Limiter.window(
        "b-window" + "-spent" * spent, 1 if spent else 10**9, per=3600, wait_timeout=0, client=c),
    "bucket": lambda c, spent: Limiter.bucket(
        "b-bucket" + "-spent" * spent, 1 if spent else 10**9, per=3600, wait_timeout=0, client=c),
    "leaky": lambda c, spent: Limiter.leaky(
        "b-leaky" + "-spent" * spent, 1 if spent else 10**9, per=3600,
        burst=1 if spent else 10**9, wait_timeout=0, client=c),
    "points": lambda c, spent: Limiter.points(
        "b-points" + "-spent" * spent, 1 if spent else 10**9, per=3600, wait_timeout=0, client=c),
    "concurrent": lambda c, spent: Limiter.concurrent(
        "b-concurrent" + "-spent" * spent, 1 if spent else 10**6, lock_timeout=30,
        wait_timeout=0, client=c),
}


def measure(server: PrivateRedis, limiter: Limiter, calls: int, refused: bool) -> dict[str, float]:
    before = command_counts(server.client)
    sent, started = CountingRedis.sent, time.perf_counter()
    for _ in range(calls):
        try:
            with limiter.within_limit():
                pass
        except OverLimit:
            if not refused:
                raise
    elapsed = time.perf_counter() - started
    trips = CountingRedis.sent - sent
    delta = diff_counts(before, command_counts(server.client))
    delta.pop("info", None)
    evals = delta.pop("evalsha", 0) + delta.pop("eval", 0)
    inner = sum(delta.values())
    return {"trips": trips / calls, "evals": evals / calls, "inner": inner / calls,
            "us": elapsed / calls * 1e6,
            **{f"cmd:{k}": v / calls for k, v in sorted(delta.items())}}


@click.command()
@click.option("--calls", default=2000, show_default=True, help="Calls per kind and path.")
def main(calls: int) -> None:
    """Round trips and Redis commands per within_limit call, per limiter kind."""
    print(f"load average {os.getloadavg()[0]:.2f}; {calls} calls per row, one thread")
    with PrivateRedis() as server:
        redis_client = CountingRedis.from_url(server.url)
        client = Client(Config(redis_url=server.url), redis_client)
        print(f"{'kind':<11} {'path':<8} {'round trips':>11} {'EVALSHA':>8} "
              f"{'cmds in Redis':>13} {'us/call':>8}  commands inside the scripts")
        for kind, build in KINDS.items():
            for refused in (False, True):
                limiter = build(client, refused)
                # Warm-up: loads the script; takes the spent limiter's one grant (and keeps
                # the concurrent limiter's one lock).
                limiter.acquire()
                row = measure(server, limiter, calls, refused)
                detail = " ".join(f"{k[4:]}={v:g}" for k, v in row.items() if k[:4] == "cmd:")
                print(f"{kind:<11} {'refused' if refused else 'granted':<8} "
                      f"{row['trips']:>11.2f} {row['evals']:>8.2f} {row['inner']:>13.2f} "
                      f"{row['us']:>8.0f}  {detail}")


if __name__ == "__main__":
    main()
