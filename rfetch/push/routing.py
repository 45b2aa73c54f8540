"""Where a client's serialised jobs are written: one :class:`rfetch.push.delivery.Delivery` per
Redis (per shard with ``Config.shards``), and each job to its queue's shard."""

from __future__ import annotations

from collections.abc import Sequence

from redis import Redis

from rfetch.config import Config
from rfetch.push.buffer import BufferedJob
from rfetch.push.delivery import Delivery
from rfetch.push.replicas import ReplicaWait
from rfetch.push.shards import positions_by_shard
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys


def delivery_for(config: Config, client: Redis) -> Delivery:
    """The delivery of one Redis (one shard) through ``client``; with ``min_replicas``
    through a connection of its own (``WAIT`` must follow the write on one connection)."""
    keys = Keys(config.namespace)
    replica_wait = ReplicaWait(config) if config.min_replicas else None
    pushes = replica_wait.redis if replica_wait is not None else client
    return Delivery(config, Commands(pushes, keys), replica_wait)


def deliver_to_shards(
    config: Config, deliveries: Sequence[Delivery], jobs: Sequence[BufferedJob], buffer: bool
) -> list[bool] | None:
    """Write ``jobs`` through the delivery of each job's shard (``deliveries`` in the order
    of ``config.shards``); per job whether written, a buffered group counting as accepted;
    with one delivery, its answer (None when buffered).

    Raises:
        BufferFull: Redis is unreachable and a buffer cannot take the jobs.
        redis.exceptions.ConnectionError, TimeoutError, OSError: Redis is unreachable and
            ``buffer`` is False.
    """
    if len(deliveries) == 1:
        return deliveries[0].write(jobs, buffer=buffer)
    groups = positions_by_shard(config, [job.queue for job in jobs])
    written = [True] * len(jobs)
    for shard, positions in groups.items():
        outcome = deliveries[shard].write([jobs[i] for i in positions], buffer=buffer)
        if outcome is not None:
            for position, ok in zip(positions, outcome, strict=True):
                written[position] = ok
    return written
