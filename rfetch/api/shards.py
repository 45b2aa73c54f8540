"""The admin API over several shards (``Config.shards``): one view of every shard.

Each shard is a complete rfetch data set (:mod:`rfetch.push.shards`), so :class:`ShardedApi`
holds one :class:`rfetch.api.Api` per shard and merges what they read: the counters and set
sizes are summed, queues and processes are listed together with the shard each is on, and a
jid is looked up on every shard. Sidekiq's web UI shows one shard at a time; this view shows
them all. Actions on a queue go to the queue's shard; actions on other jobs go through the
shard's own :class:`~rfetch.api.Api` (:meth:`ShardedApi.shard`).

A shard that is down must not hide the others: :meth:`ShardedApi.states` pings every shard,
and every merging reader takes ``only``, the shards to read (the ones that answered), so a
page shows what the live shards hold and names the shards it could not read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rfetch.config import Config
from rfetch.formatting import safe_url
from rfetch.push.shards import shard_config, shard_name, shard_of
from rfetch.store.connection import REDIS_DOWN

from . import Api
from .location import Explanation
from .processes import ProcessInfo
from .queues import Queue, QueueInfo
from .stats import DayStats, Stats


@dataclass(frozen=True)
class ShardState:
    """Whether one shard answered.

    Attributes:
        index: its place in ``Config.shards``.
        name: as :func:`rfetch.push.shards.shard_name` gives it.
        url: its URL, password hidden.
        up: it answered ``PING``.
        error: why not, when it did not.
    """

    index: int
    name: str
    url: str
    up: bool
    error: str | None = None


class ShardedApi:
    """Read every shard, merged.

    Args:
        config: a Config with ``shards``.

    Raises:
        ConfigError, RedisUnavailable: as :class:`rfetch.api.Api`, for any shard.
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self.apis = [Api(shard_config(config, i)) for i in range(len(config.shards))]

    def shard(self, index: int) -> Api:
        """The API of one shard (index in ``config.shards``)."""
        return self.apis[index]

    def shard_of(self, queue: str) -> int:
        """The index of the shard that holds ``queue`` (``shard_map`` or the hash)."""
        return shard_of(self.config, queue)

    def names(self) -> list[str]:
        """The shards' names, in order (as :func:`rfetch.push.shards.shard_name`)."""
        return [shard_name(self.config, i) for i in range(len(self.apis))]

    def states(self) -> list[ShardState]:
        """``PING`` every shard: which ones can be read now."""
        found = []
        for index, (name, api) in enumerate(zip(self.names(), self.apis, strict=True)):
            url = safe_url(self.config.shards[index])
            try:
                api.redis.ping()
            except REDIS_DOWN as exc:
                found.append(ShardState(index, name, url, False, str(exc) or type(exc).__name__))
            else:
                found.append(ShardState(index, name, url, True))
        return found

    def _chosen(self, only: Iterable[int] | None) -> list[tuple[int, str, Api]]:
        indexes = range(len(self.apis)) if only is None else sorted(set(only))
        names = self.names()
        return [(i, names[i], self.apis[i]) for i in indexes]

    def stats(self, only: Iterable[int] | None = None) -> Stats:
        """The dashboard numbers summed over the shards (``only``: these indexes), queue
        sizes by name."""
        parts = [api.stats() for _, _, api in self._chosen(only)]
        queues: dict[str, int] = {}
        for part in parts:
            for name, size in part.queues.items():
                queues[name] = queues.get(name, 0) + size
        return Stats(
            processed=sum(p.processed for p in parts),
            failed=sum(p.failed for p in parts),
            processed_today=sum(p.processed_today for p in parts),
            failed_today=sum(p.failed_today for p in parts),
            enqueued=sum(p.enqueued for p in parts),
            scheduled_size=sum(p.scheduled_size for p in parts),
            retry_size=sum(p.retry_size for p in parts),
            dead_size=sum(p.dead_size for p in parts),
            processes=sum(p.processes for p in parts),
            busy=sum(p.busy for p in parts),
            queues=queues,
        )

    def history(self, days: int = 7, only: Iterable[int] | None = None) -> list[DayStats]:
        """Processed and failed per UTC day, summed over the shards, newest first."""
        merged: dict[str, DayStats] = {}
        for _, _, api in self._chosen(only):
            for day in api.history(days):
                seen = merged.get(day.date)
                merged[day.date] = day if seen is None else DayStats(
                    day.date, seen.processed + day.processed, seen.failed + day.failed
                )
        return sorted(merged.values(), key=lambda d: d.date, reverse=True)

    def queues(self, only: Iterable[int] | None = None) -> list[QueueInfo]:
        """Every queue of every shard, each with its shard, sorted by name then shard."""
        found = [
            dataclasses.replace(info, shard=name)
            for _, name, api in self._chosen(only)
            for info in api.queues()
        ]
        return sorted(found, key=lambda q: (q.name, q.shard or ""))

    def queue(self, name: str) -> Queue:
        """The queue on its shard (``shard_map`` or the hash of its name)."""
        return self.apis[shard_of(self.config, name)].queue(name)

    def processes(
        self, only: Iterable[int] | None = None, include_dead: bool = False
    ) -> list[tuple[str, ProcessInfo]]:
        """(shard, process) for every worker process of every shard (live ones only unless
        ``include_dead``)."""
        return [
            (name, process)
            for _, name, api in self._chosen(only)
            for process in api.processes.all(include_dead=include_dead)
        ]

    def locate(
        self, jid: str, only: Iterable[int] | None = None
    ) -> list[tuple[str, Explanation]]:
        """Where a job is: (shard, explanation) for each shard that holds ``jid``."""
        found = []
        for _, name, api in self._chosen(only):
            explanation = api.explain(jid)
            if explanation.found:
                found.append((name, explanation))
        return found

    def holders(self, jid: str, only: Sequence[int] | None = None) -> list[int]:
        """Indexes of the shards where ``jid`` is found (for routing a cancel)."""
        names = self.names()
        return [names.index(name) for name, _ in self.locate(jid, only)]

    def close(self) -> None:
        """Close every shard's connections."""
        for api in self.apis:
            api.redis.close()
