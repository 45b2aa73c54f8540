"""Start-up checks of the Redis server: when it cannot keep rfetch's promises, say so once.

rfetch's guarantees (docs/guarantees.md) hold only as long as Redis keeps what it was
given. Two settings break them silently:

* no persistence (``appendonly no`` and no ``save`` points): a Redis restart loses every
  queue, private list, retry and scheduled job;
* an eviction policy other than ``noeviction``: at ``maxmemory`` Redis deletes keys, jobs
  included (Sidekiq warns about this one at start-up too).

:func:`redis_warnings` reads the settings (``INFO`` for the policy, ``CONFIG GET`` for
persistence, which managed services often refuse: then nothing is said about it), and the
launcher logs each warning once, at WARNING, before it starts fetching.
"""

from __future__ import annotations

import logging

from redis import Redis
from redis.exceptions import RedisError

log = logging.getLogger("rfetch.launcher")


def eviction_warning(policy: str) -> str | None:
    """The warning for a ``maxmemory-policy``, or None for ``noeviction``."""
    if policy in ("", "noeviction"):
        return None
    return (
        f"Redis evicts keys under memory pressure (maxmemory-policy {policy}): at maxmemory "
        "it may delete queued, running, retrying or scheduled jobs without a trace. Set "
        "maxmemory-policy noeviction (see docs/guarantees.md, Conditions)."
    )


def persistence_warning(appendonly: str, save: str) -> str | None:
    """The warning for ``appendonly`` and ``save`` values, or None when either persists."""
    if appendonly.strip().lower() == "yes" or save.strip():
        return None
    return (
        "Redis has no persistence (appendonly no, no save points): a Redis restart loses "
        "every job it holds. Turn on appendonly (appendfsync everysec or always) for the "
        "guarantees of docs/guarantees.md."
    )


def redis_warnings(redis: Redis) -> list[str]:
    """What to warn about this Redis server; settings that cannot be read are skipped.

    Args:
        redis: the worker's client.

    Returns:
        The warnings, each one sentence or two; empty when all is well or nothing could be
        read. Never raises a Redis error.
    """
    warnings: list[str] = []
    try:
        info = redis.info("memory")
        found = eviction_warning(str(info.get("maxmemory_policy", "")))
        if found:
            warnings.append(found)
    except (RedisError, OSError) as exc:
        log.debug("could not read the eviction policy: %r", exc)
    try:
        appendonly = redis.config_get("appendonly").get("appendonly")
        save = redis.config_get("save").get("save")
    except (RedisError, OSError) as exc:  # CONFIG renamed or refused (managed Redis)
        log.debug("could not read the persistence settings: %r", exc)
    else:
        if appendonly is not None and save is not None:
            found = persistence_warning(_text(appendonly), _text(save))
            if found:
                warnings.append(found)
    return warnings


def warn_about_redis(redis: Redis) -> list[str]:
    """Log :func:`redis_warnings` at WARNING, once each; returns them."""
    warnings = redis_warnings(redis)
    for warning in warnings:
        log.warning("%s", warning)
    return warnings


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
