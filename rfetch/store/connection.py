"""Redis connections built from a Config."""

from __future__ import annotations

import redis.asyncio
from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, TimeoutError
from redis.retry import Retry

from rfetch.config import Config

REDIS_DOWN = (ConnectionError, TimeoutError, OSError)
"""Errors that mean Redis could not be reached or did not answer."""


def connect(
    config: Config, *, max_connections: int | None = None, socket_timeout: float | None = None
) -> Redis:
    """A Redis client for ``config.redis_url``, with no automatic command retries.

    redis-py retries a command after a connection error by default. rfetch turns that off:
    a blocking move whose reply was lost must be seen as an error, so that the worker pushes
    back what may have been moved (reliable fetch), and a repeated push must be a decision of the
    reliable-push buffer, not of the driver.

    Args:
        config: supplies the URL and ``network_timeout`` (seconds).
        max_connections: pool size; None for redis-py's default.
        socket_timeout: seconds a command may take (default ``network_timeout``); longer
            for a client that blocks on purpose (the followers' wait for a leader).
    """
    return Redis.from_url(
        config.redis_url,
        socket_timeout=socket_timeout or config.network_timeout,
        socket_connect_timeout=config.network_timeout,
        retry=Retry(NoBackoff(), 0),
        max_connections=max_connections,
    )


def connect_async(config: Config) -> redis.asyncio.Redis:
    """An asyncio Redis client for ``config.redis_url`` (:func:`connect`'s settings: no
    automatic retries, ``network_timeout``), for the async client. It belongs to the event
    loop that first uses it."""
    return redis.asyncio.Redis.from_url(
        config.redis_url,
        socket_timeout=config.network_timeout,
        socket_connect_timeout=config.network_timeout,
        retry=Retry(NoBackoff(), 0),
    )
