"""The admin API over several shards (``Config.shards``): one view of every shard.

Each shard is a complete rfetch data set (:mod:`rfetch.shards`), so :class:`ShardedApi`
holds one :class:`rfetch.api.Api` per shard and merges what they read: the counters and set
sizes are summed, queues and processes are listed together with the shard each is on, and a
jid is looked up on every shard. Sidekiq's web UI shows one shard at a time; this view shows
them all. Actions on a queue go to the queue's shard; actions on other jobs go through the
shard's own :class:`~rfetch.api.Api` (:meth:`ShardedApi.shard`).
"""

from __future__ import annotations

import dataclasses

from rfetch.config import Config
from rfetch.shards import shard_config, shard_name, shard_of

from . import Api
from .explain import Explanation
from .processes import ProcessInfo
from .queues import Queue, QueueInfo
from .stats import DayStats, Stats


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

    def names(self) -> list[str]:
        """The shards' names, in order (as :func:`rfetch.shards.shard_name`)."""
        return [shard_name(self.config, i) for i in range(len(self.apis))]

    def stats(self) -> Stats:
        """The dashboard numbers summed over the shards (queue sizes by name)."""
        parts = [api.stats() for api in self.apis]
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

    def history(self, days: int = 7) -> list[DayStats]:
        """Processed and failed per UTC day, summed over the shards, newest first."""
        merged: dict[str, DayStats] = {}
        for api in self.apis:
            for day in api.history(days):
                seen = merged.get(day.date)
                merged[day.date] = day if seen is None else DayStats(
                    day.date, seen.processed + day.processed, seen.failed + day.failed
                )
        return sorted(merged.values(), key=lambda d: d.date, reverse=True)

    def queues(self) -> list[QueueInfo]:
        """Every queue of every shard, each with its shard, sorted by name then shard."""
        found = [
            dataclasses.replace(info, shard=name)
            for name, api in zip(self.names(), self.apis, strict=True)
            for info in api.queues()
        ]
        return sorted(found, key=lambda q: (q.name, q.shard or ""))

    def queue(self, name: str) -> Queue:
        """The queue on its shard (``shard_map`` or the hash of its name)."""
        return self.apis[shard_of(self.config, name)].queue(name)

    def processes(self) -> list[tuple[str, ProcessInfo]]:
        """(shard, process) for every live worker process of every shard."""
        return [
            (name, process)
            for name, api in zip(self.names(), self.apis, strict=True)
            for process in api.processes.all()
        ]

    def locate(self, jid: str) -> list[tuple[str, Explanation]]:
        """Where a job is: (shard, explanation) for each shard that holds ``jid``."""
        found = []
        for name, api in zip(self.names(), self.apis, strict=True):
            explanation = api.explain(jid)
            if explanation.found:
                found.append((name, explanation))
        return found

    def close(self) -> None:
        """Close every shard's connections."""
        for api in self.apis:
            api.redis.close()
