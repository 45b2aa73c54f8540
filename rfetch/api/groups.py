"""Ordering keys and fair tenants, read side: which keys are held, by which job and
where it is, which keys a failed job blocks, and the tenants of a fair queue with their
backlog and weight. What the web UI will show; the admin actions that unblock a key are
the job-set actions (retry or delete the blocking job, ``rfetch.api.sets``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rfetch.jobs.payload import may_be_gated

from .context import Context
from .records import JobRecord, to_text

PLACES = ("running", "queued", "tenant", "retry", "scheduled", "dead", "unknown")
"""Where a key's holder can be: ``running`` (a lease: a worker runs it), ``queued`` (the
public queue), ``tenant`` (its tenant's list), ``retry`` (failed: the key is blocked),
``scheduled``, ``dead`` (only briefly: death releases the key) or ``unknown`` (fetched by a
worker and running for less than a heartbeat, or waiting to start; or gone: stuck-key
rescue releases keys whose running holder vanished)."""


@dataclass(frozen=True)
class OrderingKeyInfo:
    """One held ordering key.

    Attributes:
        queue: the queue of its gate.
        key: the ordering key.
        holder: jid of the one job of the key that is out.
        place: where the holder is (see :data:`PLACES`).
        pending: jobs of the key waiting for their turn.
        lease_expires: running holder's lease expiry (Redis time, epoch s), else None
            (a holder running for less than a heartbeat interval has none yet).
        job: the holder's entry when found in a list or set (retry: the blocking job).
    """

    queue: str
    key: str
    holder: str
    place: str
    pending: int
    lease_expires: float | None = None
    job: JobRecord | None = None

    @property
    def blocked(self) -> bool:
        """Whether a failed job holds the key (in the retry or dead set)."""
        return self.place in ("retry", "dead")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "queue": self.queue,
            "key": self.key,
            "holder": self.holder,
            "place": self.place,
            "pending": self.pending,
            "blocked": self.blocked,
            "lease_expires": self.lease_expires,
            "job": self.job.to_dict() if self.job is not None else None,
        }


@dataclass(frozen=True)
class TenantInfo:
    """One tenant of a fair queue.

    Attributes:
        tenant: its name.
        backlog: its pending jobs (not counting fetched ones).
        weight: jobs it gets per turn of the ring (default 1).
        in_ring: whether it is in the ring (iff it has pending jobs).
        turn: its place in the ring (0 = gives the next job), None when not in it.
    """

    tenant: str
    backlog: int
    weight: int
    in_ring: bool
    turn: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "tenant": self.tenant,
            "backlog": self.backlog,
            "weight": self.weight,
            "in_ring": self.in_ring,
            "turn": self.turn,
        }


def gate_queues(ctx: Context, queue: str | None) -> list[str]:
    """``[queue]``, or every queue in ``queues`` (sorted)."""
    if queue is not None:
        return [queue]
    return sorted(to_text(q) for q in ctx.redis.smembers(ctx.keys.queues))


def list_ordering_keys(
    ctx: Context,
    queue: str | None = None,
    limit: int = 100,
    max_scan: int | None = 10_000,
) -> list[OrderingKeyInfo]:
    """Held ordering keys (HSCAN of ``rfetch:key-holders:<q>``), at most ``limit``, with
    where each holder is, found within ``max_scan`` entries of each list or set.

    Raises:
        ValueError: ``limit`` below 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be 1 or more, got {limit}")
    out: list[OrderingKeyInfo] = []
    for name in gate_queues(ctx, queue):
        held: dict[str, str] = {}
        for key, jid in ctx.redis.hscan_iter(ctx.keys.key_holders(name), count=limit):
            held[to_text(key)] = to_text(jid)
            if len(out) + len(held) >= limit:
                break
        out.extend(_describe(ctx, name, held, max_scan))
        if len(out) >= limit:
            break
    return out[:limit]


def _describe(
    ctx: Context, queue: str, held: dict[str, str], max_scan: int | None
) -> list[OrderingKeyInfo]:
    if not held:
        return []
    keys = ctx.keys
    names = sorted(held)
    pipe = ctx.redis.pipeline(transaction=False)
    for key in names:
        pipe.llen(keys.key_list(queue, key))
    for key in names:
        pipe.zscore(keys.key_leases(queue), f"{held[key]}:{key}")
    replies = pipe.execute()
    pending = dict(zip(names, replies[: len(names)], strict=True))
    leases = dict(zip(names, replies[len(names) :], strict=True))
    places = locate(ctx, queue, [held[k] for k in names if leases[k] is None], max_scan)
    out = []
    for key in names:
        jid = held[key]
        place, record = ("running", None) if leases[key] is not None else places.get(
            jid, ("unknown", None)
        )
        lease = leases[key]
        out.append(
            OrderingKeyInfo(
                queue,
                key,
                jid,
                place,
                int(pending[key]),
                float(lease) if lease is not None else None,
                record,
            )
        )
    return out


def locate(
    ctx: Context, queue: str, jids: Iterable[str], max_scan: int | None
) -> dict[str, tuple[str, JobRecord]]:
    """Where each jid is among the retry set, the public queue, the tenant lists of
    ``queue``, the scheduled set and the dead set (first found wins)."""
    wanted = set(jids)
    found: dict[str, tuple[str, JobRecord]] = {}
    keys = ctx.keys
    places: list[tuple[str, str, str]] = [
        ("retry", keys.retry, "zset"),
        ("queued", keys.queue(queue), "list"),
    ]
    ring = [to_text(t) for t in ctx.redis.lrange(keys.fair_ring(queue), 0, -1)]
    places += [("tenant", keys.fair_tenant(queue, t), "list") for t in ring]
    places += [("scheduled", keys.schedule, "zset"), ("dead", keys.dead, "zset")]
    for place, key, kind in places:
        if not wanted:
            break
        result = ctx.find(key, kind, wanted, place, max_scan)  # type: ignore[arg-type]
        for record in result.records:
            if record.jid in wanted:
                found[record.jid] = (place, record)
                wanted.discard(record.jid)
    return found


BLOCKED_WINDOW = 1000
"""Retry-set entries read per round trip by :func:`blocked_keys`."""


def blocked_keys(
    ctx: Context, queue: str | None = None, max_scan: int | None = 10_000
) -> list[OrderingKeyInfo]:
    """Keys held by a failed job waiting in the retry set, each with that job (the
    blocking job), in next-retry order. Unblock one by retrying (``api.retries.retry``) or
    deleting (``api.retries.delete``) that job.

    Found from the retry set's side: entries carrying an ``ordering_key`` whose jid still
    holds that key of their queue (one HGET each), read in windows of
    :data:`BLOCKED_WINDOW`, at most ``max_scan`` entries (None: the whole set). So the cost
    follows the retry set, not the number of held keys (a gate may hold a million keys
    whose holders are merely queued), and no held key is missed while the retry set is
    within ``max_scan``.

    Raises:
        ValueError: ``max_scan`` below 1.
    """
    if max_scan is not None and max_scan < 1:
        raise ValueError(f"max_scan must be 1 or more, got {max_scan}")
    out: list[OrderingKeyInfo] = []
    seen: set[str] = set()
    start = 0
    while max_scan is None or start < max_scan:
        stop = start + BLOCKED_WINDOW if max_scan is None else min(
            start + BLOCKED_WINDOW, max_scan
        )
        entries: list[tuple[bytes | str, float]] = ctx.redis.zrange(
            ctx.keys.retry, start, stop - 1, withscores=True
        )  # type: ignore[assignment]
        records = [
            JobRecord.parse(raw, "retry", float(score), start + i)
            for i, (raw, score) in enumerate(entries)
            if may_be_gated(raw)
        ]
        for info in _still_holding(ctx, records, queue):
            if info.holder not in seen:  # an entry may shift into the next window
                seen.add(info.holder)
                out.append(info)
        if len(entries) < stop - start:
            break
        start = stop
    return out


def _still_holding(
    ctx: Context, records: list[JobRecord], queue: str | None
) -> list[OrderingKeyInfo]:
    """The records that hold their ordering key (a coalesced follower or a ``skip`` job
    carries a key it does not hold), as blocked keys."""
    candidates: list[tuple[str, str, str, JobRecord]] = []
    for record in records:
        routing = record.routing
        if routing is None or routing.ordering_key is None:
            continue
        key, name, jid = routing.ordering_key, routing.queue, routing.jid
        if name and jid and queue in (None, name):
            candidates.append((name, key, jid, record))
    if not candidates:
        return []
    pipe = ctx.redis.pipeline(transaction=False)
    for name, key, _, _ in candidates:
        pipe.hget(ctx.keys.key_holders(name), key)
    for name, key, _, _ in candidates:
        pipe.llen(ctx.keys.key_list(name, key))
    replies = pipe.execute()
    holders, pending = replies[: len(candidates)], replies[len(candidates) :]
    return [
        OrderingKeyInfo(name, key, jid, "retry", int(waiting), None, record)
        for (name, key, jid, record), holder, waiting in zip(
            candidates, holders, pending, strict=True
        )
        if holder is not None and to_text(holder) == jid
    ]


def count_ordering_keys(ctx: Context, queue: str | None = None) -> int:
    """How many ordering keys are held (HLEN of each queue's ``rfetch:key-holders``), in
    ``queue`` or in every queue."""
    names = gate_queues(ctx, queue)
    pipe = ctx.redis.pipeline(transaction=False)
    for name in names:
        pipe.hlen(ctx.keys.key_holders(name))
    return sum(int(n) for n in pipe.execute())


def list_tenants(ctx: Context, queue: str, limit: int | None = None) -> list[TenantInfo]:
    """Tenants of ``queue``: those in the ring (pending jobs, in turn order) and those with
    a weight set; only the first ``limit`` of them get their backlog read (LLEN) and are
    returned when ``limit`` is given (:func:`count_tenants` tells how many there are).

    Raises:
        ValueError: ``limit`` below 1.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be 1 or more, got {limit}")
    keys = ctx.keys
    ring, weights = _ring_and_weights(ctx, queue)
    names = ring + sorted(set(weights) - set(ring))
    if limit is not None:
        names = names[:limit]
    pipe = ctx.redis.pipeline(transaction=False)
    for tenant in names:
        pipe.llen(keys.fair_tenant(queue, tenant))
    backlogs = pipe.execute()
    turn = {t: i for i, t in enumerate(ring)}
    return [
        TenantInfo(t, int(b), weights.get(t, 1), t in turn, turn.get(t))
        for t, b in zip(names, backlogs, strict=True)
    ]


def count_tenants(ctx: Context, queue: str) -> int:
    """How many tenants :func:`list_tenants` would list for ``queue`` (in the ring, or with
    a weight set)."""
    ring, weights = _ring_and_weights(ctx, queue)
    return len(set(ring) | set(weights))


def _ring_and_weights(ctx: Context, queue: str) -> tuple[list[str], dict[str, int]]:
    """The ring in turn order (next to give a job first) and the weights set."""
    keys = ctx.keys
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.lrange(keys.fair_ring(queue), 0, -1)
    pipe.hgetall(keys.fair_weights(queue))
    raw_ring, raw_weights = pipe.execute()
    ring = [to_text(t) for t in reversed(raw_ring)]
    weights = {to_text(k): int(v) for k, v in raw_weights.items()}
    return ring, weights


def set_tenant_weight(ctx: Context, queue: str, tenant: str, weight: int) -> None:
    """Give ``tenant`` ``weight`` jobs per turn of ``queue``'s ring (from its next turn).

    Raises:
        ValueError: a weight that is not a whole number from 1 to 1000, or a bad tenant.
    """
    if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 1000:
        raise ValueError(f"weight must be a whole number from 1 to 1000, got {weight!r}")
    if not isinstance(tenant, str) or not tenant or "|" in tenant:
        raise ValueError(f"tenant must be a non-empty string without '|', got {tenant!r}")
    ctx.redis.hset(ctx.keys.fair_weights(queue), tenant, weight)


def gate_lines(ctx: Context, jid: str, max_scan: int | None) -> list[tuple[str, str, JobRecord]]:
    """For explain: (state, text, entry) of every key list and tenant list holding ``jid``:
    "waiting behind key K (holder X, in the retry set)" and "waiting in tenant T's list at
    position n"."""
    out: list[tuple[str, str, JobRecord]] = []
    for name in gate_queues(ctx, None):
        keys = ctx.keys
        for raw_key in ctx.redis.scan_iter(match=keys.key_list_pattern(name), count=1000):
            list_key = to_text(raw_key)
            found = ctx.find(list_key, "list", [jid], f"key:{name}", max_scan)
            for record in found.records:
                key = list_key[len(keys.key_list(name, "")) :]
                holder = ctx.redis.hget(keys.key_holders(name), key)
                holder_jid = to_text(holder) if holder is not None else "(none)"
                place = _holder_place(ctx, name, key, holder_jid, max_scan)
                ahead = record.position or 0
                text = (
                    f"waiting behind ordering key {key!r} of queue {name} (holder jid "
                    f"{holder_jid}, {place}); {ahead} job(s) of the key go before it"
                )
                out.append(("waiting_key", text, record))
        for tenant in [to_text(t) for t in ctx.redis.lrange(keys.fair_ring(name), 0, -1)]:
            found = ctx.find(keys.fair_tenant(name, tenant), "list", [jid], "tenant", max_scan)
            for record in found.records:
                text = (
                    f"waiting in tenant {tenant}'s list of queue {name} at position "
                    f"{(record.position or 0) + 1} (1 runs next in the tenant's turn)"
                )
                out.append(("queued", text, record))
    return out


def _holder_place(ctx: Context, queue: str, key: str, jid: str, max_scan: int | None) -> str:
    if ctx.redis.zscore(ctx.keys.key_leases(queue), f"{jid}:{key}") is not None:
        return "running"
    place = locate(ctx, queue, [jid], max_scan).get(jid)
    if place is None:
        return "fetched by a worker (running, or waiting to start)"
    return {
        "retry": "in the retry set: the key is blocked until it succeeds or dies",
        "queued": "in the queue",
        "tenant": "in its tenant's list",
        "scheduled": "in the scheduled set",
        "dead": "in the dead set",
    }.get(place[0], place[0])
