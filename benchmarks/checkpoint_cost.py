"""What an iterable job's checkpoints cost: a walk over no-op items, in one process, with
the cursor flushed per item, every 100 items and every 5 s (the default), against the same
walk without checkpoints and against a plain Python loop, alternated in one sitting.

    python -m benchmarks.checkpoint_cost [--items 12000000] [--every-100 500000]
        [--per-item 20000] [--runs 3]

One private redis-server (no persistence, ``benchmarks.common.PrivateRedis``); the job's
payload is put in a private list so every checkpoint passes the fence (``checkpoint.lua``,
``LPOS`` on a one-entry list). Figures per variant (median of ``--runs``): items/s, and Redis
round trips of the walk read from ``INFO commandstats`` (the state's HGETALL at the start
and every fenced EVALSHA; the commands a script runs inside are not round trips).
``--per-item`` and ``--every-100`` items are walked by those variants (their round trips make
them slow); ``--items`` by the others: enough for a walk of more than 5 s, so the default
flushes a few times.
The cost of a variant is ``1 - its items/s / the no-checkpoint walk's items/s``; the plain
loop shows what the iteration machinery itself costs per item (hooks, boundary checks).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from typing import Any

import click

from benchmarks.common import PrivateRedis, command_counts, diff_counts
from rfetch.durable.checkpoint import Hold
from rfetch.durable.enumerators import range_enumerator
from rfetch.durable.iterable import IterableJob
from rfetch.durable.iteration import IterationRun
from rfetch.store.checkpoint_commands import CheckpointCommands
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys

PRIVATE = "queue:sq|bench|a"
RAW = b'{"class":"NoOps","jid":"b0000000000000000000000a","args":[]}'


class NoOps(IterableJob):
    """Items that do nothing."""

    def build_enumerator(self, n: int, *, cursor: int | None) -> Iterator[tuple[int, int]]:
        return range_enumerator(0, n, cursor=cursor)

    def each_iteration(self, item: int, n: int) -> None:
        pass


def _variant(name: str, **options: Any) -> type[NoOps]:
    return type(name, (NoOps,), dict(options))


VARIANTS: dict[str, type[NoOps] | None] = {
    "plain loop": None,
    "no checkpoint": NoOps,
    "every 5 s (default)": _variant("Every5s"),
    "every 100 items": _variant("Every100", checkpoint_every=100),
    "per item": _variant("PerItem", checkpoint_every=1),
}


def walk(server: PrivateRedis, cls: type[NoOps] | None, items: int) -> tuple[float, int]:
    """One walk; (items/s, Redis round trips)."""
    if cls is None:
        noop = NoOps.each_iteration
        job = NoOps()
        started = time.perf_counter()
        for item in range(items):
            noop(job, item, items)
        return items / (time.perf_counter() - started), 0
    job = cls()
    job.jid = "b0000000000000000000000a"
    hold = None
    if cls is not NoOps:
        hold = Hold(CheckpointCommands(Commands(server.client, Keys())), PRIVATE, RAW, job.jid)
    before = command_counts(server.client)
    started = time.perf_counter()
    IterationRun(job, [items], hold, None).run()
    seconds = time.perf_counter() - started
    calls = diff_counts(before, command_counts(server.client))
    # commandstats also counts the commands a script runs: a round trip is a top-level call.
    return items / seconds, sum(calls.get(c, 0) for c in ("evalsha", "eval", "fcall", "hgetall"))


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--items", default=12_000_000, show_default=True, help="Items per walk.")
@click.option("--every-100", default=500_000, show_default=True,
              help="Items of the every-100-items variant's walk.")
@click.option("--per-item", default=20_000, show_default=True,
              help="Items of the per-item variant's walk.")
@click.option("--runs", default=3, show_default=True, help="Walks of each variant.")
def main(items: int, every_100: int, per_item: int, runs: int) -> None:
    """Print the cost of checkpointing per flush policy."""
    sizes = {"per item": per_item, "every 100 items": every_100}
    with PrivateRedis() as server:
        server.client.rpush(PRIVATE, RAW)
        rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
        trips: dict[str, list[int]] = {name: [] for name in VARIANTS}
        for _ in range(runs):
            for name, cls in VARIANTS.items():
                count = sizes.get(name, items)
                rate, calls = walk(server, cls, count)
                rates[name].append(rate)
                trips[name].append(calls)
    base = statistics.median(rates["no checkpoint"])
    click.echo(f"{'variant':<22}{'items':>10}{'items/s':>14}{'round trips':>13}{'cost':>9}")
    for name in VARIANTS:
        rate = statistics.median(rates[name])
        count = sizes.get(name, items)
        cost = "" if name in ("plain loop", "no checkpoint") else f"{(1 - rate / base):.1%}"
        calls = int(statistics.median(trips[name]))
        click.echo(f"{name:<22}{count:>10,}{rate:>14,.0f}{calls:>13,}{cost:>9}")


if __name__ == "__main__":
    main()
