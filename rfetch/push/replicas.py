"""Waiting for replicas after a push (``Config.min_replicas``), on the connection that wrote.

Redis replicates asynchronously: a master that is killed right after a push may take the job
with it, and the replica Sentinel promotes never had it. ``WAIT numreplicas timeout`` blocks
until the replicas have acknowledged every write made *by the calling connection*, so it only
means something on the connection that wrote. The push side therefore uses a pool of one
connection and counts its (re)connections: a ``WAIT`` that ran after a reconnect proves
nothing about the earlier write.

Where the server has it (Redis 7.2 and later) and ``appendonly`` is on, the wait is
``WAITAOF 0 numreplicas timeout`` instead: the replicas have not only received the write but
written it to their append-only file, so it also survives a replica that restarts. Which
command a connection uses is decided once per connection (:func:`probe_wait`), from the
server's version and ``INFO persistence``.

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


class WaitCommand(enum.Enum):
    """How a connection waits for its replicas."""

    WAIT = "WAIT"
    """``WAIT numreplicas timeout``: the replicas received the writes."""
    WAITAOF = "WAITAOF"
    """``WAITAOF 0 numreplicas timeout``: the replicas wrote them to their AOF (Redis 7.2+)."""


WAITAOF_SINCE = (7, 2)
"""The first Redis version with ``WAITAOF``."""


def server_version(text: str) -> tuple[int, int]:
    """``"7.2.4"`` -> ``(7, 2)``; anything unreadable -> ``(0, 0)`` (treated as old)."""
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return 0, 0


def choose_wait(version: str, aof_enabled: bool) -> WaitCommand:
    """``WAITAOF`` when the server has it (``version`` 7.2 or later, as ``INFO server``
    ``redis_version`` says) and its append-only file is on, else ``WAIT``.

    ``WAITAOF`` is useless without an AOF on the master: its replicas then usually have none
    either, and the command would time out however healthy they are.
    """
    if aof_enabled and server_version(version) >= WAITAOF_SINCE:
        return WaitCommand.WAITAOF
    return WaitCommand.WAIT


def probe_wait(redis: Redis) -> WaitCommand:
    """Ask the server which wait command to use (two ``INFO`` calls, once per connection).

    Raises:
        redis.ConnectionError, redis.TimeoutError: Redis unreachable.
    """
    version = str(redis.info("server").get("redis_version", ""))
    aof = str(redis.info("persistence").get("aof_enabled", "0")) == "1"
    return choose_wait(version, aof)


def wait_replicas(redis: Redis, command: WaitCommand, replicas: int, timeout_ms: int) -> int:
    """Run ``command`` on ``redis`` and return how many replicas acknowledged.

    Raises:
        redis.ConnectionError, redis.TimeoutError: Redis unreachable.
    """
    if command is WaitCommand.WAITAOF:
        reply = redis.execute_command(  # type: ignore[no-untyped-call]
            "WAITAOF", 0, replicas, timeout_ms
        )
        return int(reply[1])
    return int(redis.wait(replicas, timeout_ms))


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
        self.command = WaitCommand.WAIT
        self.probed = -1
        """The connection generation :attr:`command` was probed on."""
        self.redis: Redis = connect(config, max_connections=1, on_connect=self.connected)

    def connected(self) -> None:
        """Count a new connection (the client's ``on_connect`` callback)."""
        self.generation += 1

    def check(self, generation: int) -> Replicated:
        """Whether the writes made on connection ``generation`` have reached the replicas.

        Raises:
            redis.ConnectionError, redis.TimeoutError: Redis unreachable.
        """
        if self.probed != self.generation:
            self.command = probe_wait(self.redis)
            self.probed = self.generation
        acknowledged = wait_replicas(self.redis, self.command, self.replicas, self.timeout_ms)
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
