"""The Redis server itself, as the dashboard shows it (Sidekiq Web's Redis panel)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.cluster import RedisCluster

from .context import Context


@dataclass(frozen=True)
class RedisInfo:
    """A few fields of ``INFO``.

    Attributes:
        version: ``redis_version``.
        mode: ``redis_mode`` (standalone, cluster, sentinel).
        uptime_seconds: seconds since the server started.
        connected_clients: open client connections.
        used_memory: bytes used by the data set.
        used_memory_peak: the peak of ``used_memory``.
        maxmemory: the memory limit in bytes (0: none).
        maxmemory_policy: eviction policy; anything but ``noeviction`` can silently drop
            jobs.
    """

    version: str
    mode: str
    uptime_seconds: int
    connected_clients: int
    used_memory: int
    used_memory_peak: int
    maxmemory: int
    maxmemory_policy: str

    @property
    def evicts(self) -> bool:
        """Whether Redis may evict keys (and so jobs) when full."""
        return self.maxmemory_policy not in ("noeviction", "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "version": self.version,
            "mode": self.mode,
            "uptime_seconds": self.uptime_seconds,
            "connected_clients": self.connected_clients,
            "used_memory": self.used_memory,
            "used_memory_peak": self.used_memory_peak,
            "maxmemory": self.maxmemory,
            "maxmemory_policy": self.maxmemory_policy,
            "evicts": self.evicts,
        }


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def read_redis_info(ctx: Context) -> RedisInfo:
    """``INFO server``, ``clients`` and ``memory`` in one round trip; on a Redis Cluster,
    of the master that holds the namespace's hash slot."""
    info: dict[str, Any] = {}
    if isinstance(ctx.redis, RedisCluster):
        node = ctx.redis.get_node_from_key(ctx.keys.queues)
        for section in ("server", "clients", "memory"):
            info.update(ctx.redis.info(section, target_nodes=node))
    else:
        pipe = ctx.redis.pipeline(transaction=False)
        for section in ("server", "clients", "memory"):
            pipe.info(section)
        for part in pipe.execute():
            info.update(part)
    text = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in info.items()}
    return RedisInfo(
        version=text.get("redis_version", "?"),
        mode=text.get("redis_mode", "standalone"),
        uptime_seconds=_int(info.get("uptime_in_seconds")),
        connected_clients=_int(info.get("connected_clients")),
        used_memory=_int(info.get("used_memory")),
        used_memory_peak=_int(info.get("used_memory_peak")),
        maxmemory=_int(info.get("maxmemory")),
        maxmemory_policy=text.get("maxmemory_policy", ""),
    )
