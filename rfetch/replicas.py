"""Waiting for replicas after a push (``Config.min_replicas``), on the connection that wrote.

Redis replicates asynchronously: a master that is killed right after a push may take the job
with it, and the replica Sentinel promotes never had it. ``WAIT numreplicas timeout`` blocks
until the replicas have acknowledged every write made *by the calling connection*, so it only
means something on the connection that wrote. The push side therefore uses a pool of one
connection and counts its (re)connections: a ``WAIT`` that ran after a reconnect proves
nothing about the earlier write.

None of Sidekiq, Celery or RQ waits for replicas; BullMQ documents the same loss window.
"""

from __future__ import annotations

import enum

from redis import Redis

from rfetch.config import Config
from rfetch.store.connection import connect


class Replicated(enum.Enum):
    """What a ``WAIT`` says about a write."""

    YES = "yes"
    """At least ``min_replicas`` replicas have it."""
    NOT_YET = "not yet"
    """Same connection, too few replicas within the timeout: ask again later."""
    UNKNOWN = "unknown"
    """The connection changed since the write: the write may be lost; push it again."""


class NotReplicated(Exception):
    """A write reached the master but not ``min_replicas`` replicas in time.

    Args:
        generation: the connection count at the write, or None when the write's
            connection is already gone (the jobs must be pushed again).
    """

    def __init__(self, message: str, generation: int | None) -> None:
        super().__init__(message)
        self.generation = generation


class ReplicaWait:
    """A one-connection client for pushes, and ``WAIT`` on it.

    Args:
        config: ``min_replicas`` (1 or more), ``min_replicas_timeout`` (seconds), and the
            Redis URL of :attr:`redis`, the client every push must use.

    Raises:
        ConfigError, RedisUnavailable: as :func:`rfetch.store.connection.connect`.
    """

    def __init__(self, config: Config) -> None:
        self.replicas = config.min_replicas
        self.timeout_ms = max(1, int(config.min_replicas_timeout * 1000))
        self.generation = 0
        self.redis: Redis = connect(config, max_connections=1, on_connect=self.connected)

    def connected(self) -> None:
        """Count a new connection (the client's ``on_connect`` callback)."""
        self.generation += 1

    def check(self, generation: int) -> Replicated:
        """Whether the writes made on connection ``generation`` have reached the replicas.

        Raises:
            redis.ConnectionError, redis.TimeoutError: Redis unreachable.
        """
        acknowledged = self.redis.wait(self.replicas, self.timeout_ms)
        if self.generation != generation:
            return Replicated.UNKNOWN
        return Replicated.YES if acknowledged >= self.replicas else Replicated.NOT_YET

    def after_write(self) -> None:
        """Raise NotReplicated unless the write just made is on enough replicas.

        Raises:
            NotReplicated: too few replicas in time, or the connection changed.
            redis.ConnectionError, redis.TimeoutError: Redis unreachable.
        """
        generation = self.generation
        outcome = self.check(generation)
        if outcome is Replicated.YES:
            return
        raise NotReplicated(
            f"the push reached the master but not {self.replicas} replica(s) within "
            f"{self.timeout_ms} ms",
            generation if outcome is Replicated.NOT_YET else None,
        )
