"""Fetch caps (concurrency keys) seen from the admin side: each key's running and waiting
counts, and explain's line for a job that waits for a slot ("waits: 3 of 3 running for
tenant:42").

Read from the cap keys of ``rfetch/lua/lib/cap.lua`` (docs/data-model.md): a key is known
while it has jobs holding a slot or waiting (its limit is kept in ``rfetch:cap-limits:<q>``
exactly that long), so listing keys needs no SCAN: one HGETALL per hash and one LLEN per
key, pipelined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .context import Context
from .records import JobRecord, to_text


@dataclass(frozen=True)
class ConcurrencyKey:
    """One concurrency key of one queue.

    Attributes:
        queue: the queue name.
        key: the concurrency key.
        limit: most jobs of the key fetched and unfinished at once (the latest pushed).
        running: jobs holding a slot: fetched by a worker, running or about to.
        waiting: jobs waiting in Redis, not fetched.
    """

    queue: str
    key: str
    limit: int
    running: int
    waiting: int

    @property
    def full(self) -> bool:
        """Whether every slot is taken (its waiting jobs wait for one)."""
        return self.running >= self.limit

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"queue": self.queue, "key": self.key, "limit": self.limit,
                "running": self.running, "waiting": self.waiting, "full": self.full}


def capped_queues(ctx: Context) -> list[str]:
    """Names of the queues that have had capped jobs (``rfetch:cap-queues``), sorted."""
    return sorted(to_text(q) for q in ctx.redis.smembers(ctx.keys.cap_queues))


def concurrency_keys(ctx: Context, queue: str | None = None) -> list[ConcurrencyKey]:
    """Every concurrency key with jobs running or waiting, of ``queue`` or of every capped
    queue, sorted by queue then key.

    Raises:
        redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
    """
    names = [queue] if queue is not None else capped_queues(ctx)
    keys = ctx.keys
    pipe = ctx.redis.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(keys.cap_limits(name))
        pipe.hgetall(keys.cap_held(name))
    replies = pipe.execute()
    rows: list[tuple[str, str, int, int]] = []
    for i, name in enumerate(names):
        limits = {to_text(k): v for k, v in replies[2 * i].items()}
        held = {to_text(k): v for k, v in replies[2 * i + 1].items()}
        for key in sorted(limits.keys() | held.keys()):
            rows.append((name, key, _count(limits.get(key), 1), _count(held.get(key), 0)))
    pipe = ctx.redis.pipeline(transaction=False)
    for name, key, _, _ in rows:
        pipe.llen(keys.cap_list(name, key))
    waiting = pipe.execute() if rows else []
    return [
        ConcurrencyKey(name, key, limit, running, int(count))
        for (name, key, limit, running), count in zip(rows, waiting, strict=True)
    ]


def cap_wait_text(row: ConcurrencyKey, ahead: int) -> str:
    """Explain's line for a job waiting for a slot of ``row``'s key, ``ahead`` jobs of the
    key before it."""
    if row.full:
        why = f"waits: {row.running} of {row.limit} running for {row.key}"
    else:
        why = (
            f"waits for its key's turn in the ready ring: {row.running} of {row.limit} "
            f"running for {row.key}"
        )
    return f"{why} (queue {row.queue}; {ahead} job(s) of the key go before it)"


def cap_lines(ctx: Context, jid: str, max_scan: int | None) -> list[tuple[str, JobRecord]]:
    """For explain: (text, entry) of every concurrency key's waiting list holding ``jid``."""
    out: list[tuple[str, JobRecord]] = []
    for row in concurrency_keys(ctx):
        if not row.waiting:
            continue
        list_key = ctx.keys.cap_list(row.queue, row.key)
        found = ctx.find(list_key, "list", [jid], f"cap:{row.queue}", max_scan)
        for record in found.records:
            out.append((cap_wait_text(row, record.position or 0), record))
    return out


def _count(value: bytes | str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
