"""Limiters (``rfetch.Limiter``) as the API, the CLI, the web UI and the metrics see them:
each limiter's kind, limit, current use, held locks with their holders, and its counters;
reset a limiter, release a stuck lock.

Limiters are found through the registry set ``rfetch:limiters`` that every limiter call adds
its name to; a name whose hash has expired (``ttl`` without a call) is removed from the set
when read here. See docs/flow-control.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from .context import Context
from .records import to_text

DEFAULT_MAX_LIMITERS = 1000
"""Limiters read at most per listing (dynamic names can make many)."""


class LimiterNotFound(KeyError):
    """No limiter of that name exists in Redis (never called, or expired)."""


@dataclass(frozen=True)
class LockInfo:
    """A concurrent limiter's lock.

    Attributes:
        token: the lock's token.
        holder: ``host:pid:thread`` of the process that took it.
        expires_in: seconds until it expires unless renewed (negative: expired, reclaimed
            by the next acquire).
    """

    token: str
    holder: str
    expires_in: float


@dataclass(frozen=True)
class LimiterInfo:
    """One limiter as stored in Redis.

    Attributes:
        name: its name.
        kind: ``window``, ``bucket``, ``leaky``, ``points`` or ``concurrent``.
        limit: calls (points, locks) per period, or at once.
        period: seconds (0 for concurrent).
        in_use: current use: calls in the current window, units in the bucket, locks held.
        capacity: what ``in_use`` is measured against (``limit``; ``burst`` for leaky).
        lock_timeout: concurrent only, seconds (else None).
        locks: concurrent only: the locks held, longest-lived first.
        calls: grants so far.
        waited: grants that waited first.
        wait_seconds: seconds those grants waited, in total.
        overlimit: calls that gave up (``OverLimit`` raised).
        reclaimed: concurrent only: expired locks taken back from holders that stopped.
        ttl: seconds until the limiter's hash expires without a call.
    """

    name: str
    kind: str
    limit: int
    period: float
    in_use: int
    capacity: int
    lock_timeout: float | None
    locks: list[LockInfo] = field(default_factory=list)
    calls: int = 0
    waited: int = 0
    wait_seconds: float = 0.0
    overlimit: int = 0
    reclaimed: int = 0
    ttl: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _int(fields: dict[str, str], name: str, default: int = 0) -> int:
    try:
        return int(float(fields.get(name, default)))
    except ValueError:
        return default


def _float(fields: dict[str, str], name: str) -> float | None:
    try:
        return float(fields[name])
    except (KeyError, ValueError):
        return None


def parse_limiter(name: str, raw: dict[Any, Any], now_ms: float, ttl_ms: int) -> LimiterInfo:
    """A :class:`LimiterInfo` from a limiter hash read at Redis time ``now_ms``."""
    f = {to_text(k): to_text(v) for k, v in raw.items()}
    kind, limit = f.get("kind", "?"), max(_int(f, "limit", 1), 1)
    period_ms = float(_int(f, "period"))
    capacity = _int(f, "capacity", limit) if kind in ("bucket", "leaky", "points") else limit
    locks: list[LockInfo] = []
    in_use = 0
    if kind == "window" and period_ms > 0:
        if _int(f, "w", -1) == math.floor(now_ms / period_ms):
            in_use = _int(f, "n")
    elif kind in ("bucket", "leaky", "points") and period_ms > 0:
        tat = _float(f, "tat") or 0.0
        in_use = max(0, math.ceil((tat - now_ms) / (period_ms / limit) - 0.001))
    elif kind == "concurrent":
        for key, value in f.items():
            if key.startswith("l:"):
                expiry, _, holder = value.partition(" ")
                try:
                    left = (float(expiry) - now_ms) / 1000
                except ValueError:  # not written by the script: shown as expired
                    left = 0.0
                locks.append(LockInfo(key[2:], holder, round(left, 3)))
        locks.sort(key=lambda lock: lock.expires_in)
        in_use = sum(1 for lock in locks if lock.expires_in > 0)
    lock_timeout = _float(f, "lock_timeout")
    return LimiterInfo(
        name=name,
        kind=kind,
        limit=limit,
        period=period_ms / 1000,
        in_use=in_use,
        capacity=capacity,
        lock_timeout=lock_timeout / 1000 if lock_timeout is not None else None,
        locks=locks,
        calls=_int(f, "calls"),
        waited=_int(f, "waited"),
        wait_seconds=_int(f, "wait_ms") / 1000,
        overlimit=_int(f, "overlimit"),
        reclaimed=_int(f, "reclaimed"),
        ttl=ttl_ms / 1000 if ttl_ms >= 0 else None,
    )


def list_limiters(ctx: Context, limit: int = DEFAULT_MAX_LIMITERS) -> list[LimiterInfo]:
    """Every limiter in the registry (at most ``limit``, by name), read with ``TIME`` and one
    pipeline; names whose hash expired are removed from the registry."""
    names = sorted(to_text(n) for n in ctx.redis.sscan_iter(ctx.keys.limiters, count=500))
    names = names[:limit]
    infos = _read(ctx, names)
    gone = [n for n, info in zip(names, infos, strict=True) if info is None]
    if gone:
        ctx.redis.srem(ctx.keys.limiters, *gone)
    return [info for info in infos if info is not None]


def read_limiter(ctx: Context, name: str) -> LimiterInfo:
    """One limiter.

    Raises:
        LimiterNotFound: no such limiter in Redis.
    """
    [info] = _read(ctx, [name])
    if info is None:
        raise LimiterNotFound(name)
    return info


def reset_limiter(ctx: Context, name: str) -> bool:
    """Delete a limiter's hash: its window, bucket, locks and counters start afresh (a live
    holder of a dropped lock logs it at its next renewal). Returns whether it existed."""
    removed = bool(ctx.redis.delete(ctx.keys.limiter(name)))
    ctx.redis.srem(ctx.keys.limiters, name)
    return removed


def release_lock(ctx: Context, name: str, token: str) -> bool:
    """Drop one lock of a concurrent limiter (a holder known to be gone, before its
    ``lock_timeout``). Returns whether it was held."""
    return bool(ctx.redis.hdel(ctx.keys.limiter(name), f"l:{token}"))


def _read(ctx: Context, names: list[str]) -> list[LimiterInfo | None]:
    if not names:
        return []
    now_ms = ctx.redis_time() * 1000  # apart: a Redis Cluster pipeline refuses TIME
    pipe = ctx.redis.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(ctx.keys.limiter(name))
        pipe.pttl(ctx.keys.limiter(name))
    replies = pipe.execute()
    out: list[LimiterInfo | None] = []
    for i, name in enumerate(names):
        raw, ttl = replies[2 * i], replies[2 * i + 1]
        out.append(parse_limiter(name, raw, now_ms, int(ttl)) if raw else None)
    return out


class LimiterMethods:
    """:class:`rfetch.api.Api`'s limiter methods (a mixin: the Api gives ``ctx``)."""

    ctx: Context

    def limiters(self) -> list[LimiterInfo]:
        """Every limiter (``rfetch.Limiter``) with its kind, limit, current use, held locks
        and counters (see :mod:`rfetch.api.limiters`, docs/flow-control.md)."""
        return list_limiters(self.ctx)

    def limiter(self, name: str) -> LimiterInfo:
        """One limiter.

        Raises:
            LimiterNotFound: no such limiter in Redis (never called, or expired).
        """
        return read_limiter(self.ctx, name)

    def reset_limiter(self, name: str) -> bool:
        """Delete a limiter's state, locks and counters; True if it existed."""
        return reset_limiter(self.ctx, name)

    def release_limiter_lock(self, name: str, token: str) -> bool:
        """Drop one lock of a concurrent limiter; True if it was held."""
        return release_lock(self.ctx, name, token)
