"""Whether an async job is next in a queue, read before a probe for async jobs fetches
(:mod:`rfetch.worker.fetch_room`): a probe that fetched a sync job while every thread was
busy gave it back to its queue, a give-back a sync-only worker does not make; a look at the
queues' heads moves nothing."""

from __future__ import annotations

from collections.abc import Collection

from rfetch.worker.event_loop import AsyncPool
from rfetch.worker.fetch import ReliableFetch


def async_next(fetch: ReliableFetch, loop: AsyncPool | None, paused: Collection[str]) -> bool:
    """Whether the next job of one of the process's queues is of an async class.

    One ``LINDEX <queue> -1`` per queue (the end the fetch takes from), in one round trip.
    A fair, capped or priority queue answers True: its jobs may wait in a tenant's or a
    cap's ring or its priority set, where only a fetch tells.

    Args:
        fetch: the process's reliable fetch (its queues, broken queues, fair and capped
            queues as last looked up).
        loop: the event loop's pool (None: no async class, False).
        paused: queue names not fetched from now.

    Raises:
        redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
    """
    if loop is None:
        return False
    skip = set(paused) | set(fetch.broken)
    names = [spec.name for spec in fetch.config.queues if spec.name not in skip]
    if any(name in fetch.fair or name in fetch.capped or name in fetch.prio for name in names):
        return True
    pipe = fetch.redis.pipeline(transaction=False)
    for name in names:
        pipe.lindex(fetch.keys.queue(name), -1)
    heads: list[bytes | None] = pipe.execute()
    return any(
        raw is not None and loop.accepts(fetch.unit(name, raw))
        for name, raw in zip(names, heads, strict=True)
    )
