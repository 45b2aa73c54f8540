"""Redis Cluster: every key of one namespace in one hash slot.

A Redis Cluster runs a script or a MULTI/EXEC only when all its keys are in one hash slot
(``CROSSSLOT`` otherwise). rfetch's keys all start with the namespace, and every script
declares its fixed keys in KEYS; the two families of keys a script derives inside Lua (a
tenant's list ``<ring key>|<tenant>`` and the per-queue keys of ``enqueue_due.lua``) are built
from the namespace prefix too. So with a namespace that is a hash tag, ``{myapp}``, every key
is ``{myapp}:...`` and hashes to the slot of ``myapp``: one namespace lives on one master
(and its replicas), and several namespaces spread over the masters. A cluster carries more
namespaces, not one bigger queue; to spread one application's queues, see ``Config.shards``
in docs/operations.md.

The client is redis-py's own :class:`redis.cluster.RedisCluster` (slot map, ``MOVED`` and
``ASK`` redirections, a failover seen as a connection error and a refreshed slot map), with
command retries turned off like every rfetch client (a lost reply must be seen as an error).
"""

from __future__ import annotations

import re
from typing import Any, cast

import redis.asyncio
import redis.asyncio.cluster
from redis import Redis
from redis.cluster import RedisCluster

from rfetch.errors import ConfigError

HASH_TAG = re.compile(r"^\{[^{}]+\}$")
"""A namespace that is a whole hash tag: ``{myapp}``."""


def check_namespace(namespace: str | None) -> None:
    """Require a hash-tag namespace for cluster mode.

    Raises:
        ConfigError: no namespace, or one that is not ``{name}``.
    """
    if namespace is None or not HASH_TAG.match(namespace):
        raise ConfigError(
            "cluster mode needs a namespace that is a hash tag, such as '{myapp}', so that "
            f"every key is in one hash slot; got {namespace!r}"
        )


def connect_cluster(url: str, connection_kwargs: dict[str, Any]) -> Redis:
    """A RedisCluster client that discovers the cluster from the node ``url`` names.

    ``RedisCluster`` is not a subclass of ``Redis`` but has the same commands, pipelines
    (MULTI/EXEC on one slot) and script calls that rfetch uses; it is returned as ``Redis`` so
    that every component takes either.

    Args:
        url: ``redis://host:port`` of any node.
        connection_kwargs: socket timeouts (seconds), ``retry`` (the cluster client's retry
            count is taken from it), ``max_connections`` (per node).
    """
    kwargs = dict(connection_kwargs)
    kwargs.pop("redis_connect_func", None)
    return cast(Redis, RedisCluster.from_url(url, **kwargs))


def connect_cluster_async(url: str, connection_kwargs: dict[str, Any]) -> redis.asyncio.Redis:
    """:func:`connect_cluster` for asyncio code: redis-py's
    :class:`redis.asyncio.cluster.RedisCluster`, which discovers the cluster at its first
    command (from a running event loop) and follows ``MOVED``, ``ASK`` and a failover as the
    threaded client does. Returned as ``redis.asyncio.Redis``, whose commands and script
    calls it has, for the same reason as :func:`connect_cluster`.

    Args:
        url, connection_kwargs: as :func:`connect_cluster`.
    """
    kwargs = dict(connection_kwargs)
    kwargs.pop("redis_connect_func", None)
    client = redis.asyncio.cluster.RedisCluster.from_url(url, **kwargs)
    return cast(redis.asyncio.Redis, client)


def node_client(redis: Redis, key: str) -> Redis:
    """A client of the one server that holds ``key``: ``redis`` itself, or on a Redis
    Cluster the client of the master serving ``key``'s slot (where a hash-tag namespace
    keeps every key). For commands that take a cursor, such as SCAN, which a cluster client
    runs node by node with a cursor per node.

    Raises:
        redis.exceptions.RedisClusterException: no node serves the slot.
    """
    if not isinstance(redis, RedisCluster):
        return redis
    node = redis.get_node_from_key(key)
    client = node.redis_connection if node is not None else None
    if client is None:
        client = redis.get_redis_connection(node)
    return cast(Redis, client)

