"""Sharding: several Redis servers, each queue on one of them (``Config.shards``).

Sidekiq's guidance is about 25,000 jobs/s per Redis, then shard: put different queues on
different Redis servers. A queue lives on exactly one shard, chosen by ``Config.shard_map``
(queue name -> shard index) or, for queues not in the map, by a stable hash of the name
(CRC-32 modulo the number of shards: the same on every host and Python version). Everything
about a job stays on its queue's shard: its pushes, ordering keys, tenants, unique locks,
the schedule, retry and dead sets it passes through, and the private lists of the workers
that fetch it. So every shard is a complete rfetch data set, and each component simply runs
once per shard:

- a client pushes each job to its queue's shard (:class:`rfetch.push.client.Client`);
- a worker runs one fetch / heartbeat / poller / recovery set per shard of its queues,
  inside one process (:class:`rfetch.worker.shards.ShardedLauncher`);
- the admin API, CLI and web UI read every shard and merge them, naming each job's shard
  (:class:`rfetch.api.shards.ShardedApi`).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

from rfetch.config import Config


def shard_of(config: Config, queue: str) -> int:
    """Index in ``config.shards`` of the shard that holds ``queue`` (0 without shards)."""
    if not config.shards:
        return 0
    mapped = config.shard_map.get(queue)
    if mapped is not None:
        return mapped
    return zlib.crc32(queue.encode("utf-8")) % len(config.shards)


def shard_config(config: Config, index: int) -> Config:
    """The Config of one shard: its URL as ``redis_url``, no shards (an ordinary Config)."""
    return config.replace(redis_url=config.shards[index], shards=(), shard_map={})


def shard_name(config: Config, index: int) -> str:
    """How the API, CLI and web UI name a shard: ``"<index>"`` (its place in ``shards``)."""
    return str(index)


def queues_by_shard(config: Config, names: Iterable[str]) -> dict[int, list[str]]:
    """Queue names grouped by shard index, in the given order."""
    groups: dict[int, list[str]] = {}
    for name in names:
        groups.setdefault(shard_of(config, name), []).append(name)
    return groups


def positions_by_shard(config: Config, queues: Sequence[str]) -> dict[int, list[int]]:
    """Positions in ``queues`` (the queues of jobs about to be pushed) grouped by shard
    index, each group in order: how the sync and asyncio clients split a bulk push."""
    groups: dict[int, list[int]] = {}
    for position, queue in enumerate(queues):
        groups.setdefault(shard_of(config, queue), []).append(position)
    return groups
