"""Redis connections built from a Config: one Redis server, or the master behind Sentinel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis.asyncio
from redis import Redis
from redis.backoff import NoBackoff
from redis.connection import AbstractConnection
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    TimeoutError,
    TryAgainError,
)
from redis.retry import Retry

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.store.cluster import connect_cluster, connect_cluster_async
from rfetch.store.sentinel import connect_sentinel, connect_sentinel_async, is_sentinel_url

REDIS_DOWN = (
    ConnectionError, TimeoutError, OSError, ClusterDownError, TryAgainError, AskError,
)
"""Errors that mean Redis could not be reached or did not answer. On a Redis Cluster also a
slot that moved (``MOVED``/``ASK``: redis-py's transaction pipeline reports it after
updating its slot map, and nothing of the transaction ran), a cluster that is down, or
``TRYAGAIN`` during a resharding: all pass once the cluster has settled."""


def connect(
    config: Config,
    *,
    max_connections: int | None = None,
    socket_timeout: float | None = None,
    on_connect: Callable[[], None] | None = None,
) -> Redis:
    """A Redis client for ``config.redis_url``, with no automatic command retries.

    With ``config.cluster``, the URL names one node of a Redis Cluster and the client is
    redis-py's :class:`redis.cluster.RedisCluster` (:mod:`rfetch.store.cluster`). A
    ``redis+sentinel://`` URL gives redis-py's Sentinel client of the named master
    (:mod:`rfetch.store.sentinel`), which follows a failover; the sentinels are asked for the
    master once here, so a wrong setting fails now rather than in a back-off loop.

    redis-py retries a command after a connection error by default. rfetch turns that off:
    a blocking move whose reply was lost must be seen as an error, so that the worker pushes
    back what may have been moved (reliable fetch), and a repeated push must be a decision of the
    reliable-push buffer, not of the driver.

    Args:
        config: supplies the URL and ``network_timeout`` (seconds).
        max_connections: pool size; None for redis-py's default.
        socket_timeout: seconds a command may take (default ``network_timeout``); longer
            for a client that blocks on purpose (the followers' wait for a leader).
        on_connect: called after each new connection is set up (the push side counts
            connections with it, to know that a ``WAIT`` ran on the connection that wrote).

    Raises:
        ConfigError: a malformed Sentinel URL, or a master name the sentinels do not know.
        RedisUnavailable: no sentinel of a Sentinel URL answered.
    """
    options: dict[str, Any] = {
        "socket_timeout": socket_timeout or config.network_timeout,
        "socket_connect_timeout": config.network_timeout,
        "retry": Retry(NoBackoff(), 0),
    }
    if max_connections is not None:
        options["max_connections"] = max_connections
    if on_connect is not None:
        options["redis_connect_func"] = _after_connect(on_connect)
    if is_sentinel_url(config.redis_url):
        return connect_sentinel(
            config.redis_url, options, sentinel_password=config.sentinel_password
        )
    if config.cluster:
        return connect_cluster(config.redis_url, options)
    return Redis.from_url(config.redis_url, **options)


def _after_connect(callback: Callable[[], None]) -> Callable[[AbstractConnection], None]:
    def connected(connection: AbstractConnection) -> None:
        connection.on_connect()  # type: ignore[no-untyped-call]
        callback()

    return connected


def connect_async(config: Config) -> redis.asyncio.Redis:
    """An asyncio Redis client for ``config.redis_url`` with :func:`connect`'s settings (no
    automatic retries, ``network_timeout``) and kinds: one server, the master behind
    Sentinel (:func:`rfetch.store.sentinel.connect_sentinel_async`) or a Redis Cluster
    (:func:`rfetch.store.cluster.connect_cluster_async`). It belongs to the event loop that
    first uses it.

    ``min_replicas`` needs no connection here: the asyncio client writes those pushes
    through the threaded client's one push connection, where ``WAIT`` follows the write
    (:class:`rfetch.push.async_client.AsyncClient`).

    Raises:
        ConfigError: a malformed Sentinel URL; a Config with shards (give one shard's,
            :func:`rfetch.push.shards.shard_config`).
    """
    if config.shards:
        raise ConfigError("connect_async connects to one Redis: give one shard's Config")
    options: dict[str, Any] = {
        "socket_timeout": config.network_timeout,
        "socket_connect_timeout": config.network_timeout,
        "retry": Retry(NoBackoff(), 0),
    }
    if is_sentinel_url(config.redis_url):
        return connect_sentinel_async(
            config.redis_url, options, sentinel_password=config.sentinel_password
        )
    if config.cluster:
        return connect_cluster_async(config.redis_url, options)
    return redis.asyncio.Redis.from_url(config.redis_url, **options)
