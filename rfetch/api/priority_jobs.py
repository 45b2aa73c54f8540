"""A queue's jobs in the order workers take them, its priority set included
(``rfetch/lua/lib/priority.lua``): the jobs of priority > 0 (lowest score first), then the
list ``queue:<q>`` (right end first), then the jobs of priority < 0. Positions count in that
order (0 = runs next); a record of the priority set carries its score."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from rfetch.store.priority import ABOVE_LIST_SCORE

from .context import Context, Found
from .records import JobRecord


@dataclass(frozen=True)
class QueueParts:
    """How many jobs wait in each part of a queue, in run order.

    Attributes:
        above: jobs of priority > 0 (run before the list).
        listed: jobs in the list ``queue:<q>`` (priority 0: Ruby's and plain pushes).
        below: jobs of priority < 0 (run once the list is empty).
    """

    above: int
    listed: int
    below: int

    @property
    def size(self) -> int:
        """Every job waiting in the queue."""
        return self.above + self.listed + self.below


def queue_parts(ctx: Context, name: str) -> QueueParts:
    """The sizes of ``name``'s parts, in one round trip (LLEN, ZCARD, ZCOUNT)."""
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.llen(ctx.keys.queue(name))
    pipe.zcard(ctx.keys.prio(name))
    pipe.zcount(ctx.keys.prio(name), "-inf", f"({ABOVE_LIST_SCORE}")
    listed, prio, above = pipe.execute()
    return QueueParts(int(above), int(listed), int(prio) - int(above))


def run_order(
    ctx: Context, name: str, start: int, max_scan: int | None, newest_first: bool
) -> Iterator[JobRecord]:
    """The jobs of queue ``name`` from ``start`` in run order (or, with ``newest_first``,
    its reverse), at most ``max_scan`` of them; each record's position is its place in run
    order (0 = runs next)."""
    parts = queue_parts(ctx, name)
    location = f"queue:{name}"
    zkey, lkey = ctx.keys.prio(name), ctx.keys.queue(name)

    def above(at: int, n: int | None) -> Iterator[JobRecord]:
        return ctx.iter_zset(zkey, location, 0, parts.above - 1, at, newest_first, n)

    def listed(at: int, n: int | None) -> Iterator[JobRecord]:
        return ctx.iter_list(lkey, location, at, n, newest_first)

    def below(at: int, n: int | None) -> Iterator[JobRecord]:
        last = parts.above + parts.below - 1
        return ctx.iter_zset(zkey, location, parts.above, last, at, newest_first, n)

    # (size, first run position, the part's records from an offset, bounded)
    segments: list[tuple[int, int, Callable[[int, int | None], Iterator[JobRecord]]]] = [
        (parts.above, 0, above),
        (parts.listed, parts.above, listed),
        (parts.below, parts.above + parts.listed, below),
    ]
    if newest_first:
        segments.reverse()
    left = max_scan
    for size, first, records in segments:
        if start >= size:
            start -= size
            continue
        for record in records(start, left):
            rank = record.position or 0
            if record.score is not None:  # a rank in the sorted set
                rank -= parts.above if first else 0
            yield replace(record, position=first + rank)
            if left is not None:
                left -= 1
                if left <= 0:
                    return
        start = 0


def find_in_queue(ctx: Context, name: str, jids: list[str], max_scan: int | None) -> Found:
    """Entries of queue ``name`` with these jids, in its list and its priority set (each
    searched up to ``max_scan`` entries on the server), positions in run order."""
    parts = queue_parts(ctx, name)
    location = f"queue:{name}"
    found = ctx.find(ctx.keys.queue(name), "list", jids, location, max_scan)
    found.records = [replace(r, position=(r.position or 0) + parts.above) for r in found.records]
    if parts.above + parts.below:
        prio = ctx.find(ctx.keys.prio(name), "zset", jids, location, max_scan)
        for record in prio.records:
            rank = record.position or 0
            found.records.append(
                replace(record, position=rank if rank < parts.above else rank + parts.listed)
            )
        found.scanned += prio.scanned
        found.complete = found.complete and prio.complete
    return found
