"""Checks of the Redis topology settings: Sentinel, Cluster, ``min_replicas`` and shards.

Called by :meth:`rfetch.config.Config.validate`; each rule raises a ConfigError naming the
setting. What the settings do: :mod:`rfetch.store.sentinel`, :mod:`rfetch.store.cluster`,
:mod:`rfetch.push.replicas` and :mod:`rfetch.push.shards`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rfetch.errors import ConfigError
from rfetch.store.cluster import check_namespace
from rfetch.store.sentinel import SentinelUrl, is_sentinel_url


def check_topology(
    redis_url: str,
    *,
    cluster: bool,
    namespace: str | None,
    min_replicas: int,
    min_replicas_timeout: float,
    shards: Sequence[str],
    shard_map: Mapping[str, int],
    processes: int,
) -> None:
    """Check the Config fields of the same names.

    Raises:
        ConfigError: a malformed Sentinel URL, cluster mode without a ``{tag}`` namespace
            or with Sentinel or ``min_replicas``, a negative ``min_replicas``, a timeout that
            is not positive, or a bad shard setting (see :func:`check_shards`).
    """
    if is_sentinel_url(redis_url):
        SentinelUrl.parse(redis_url)
    check_shards(shards, shard_map, cluster=cluster, min_replicas=min_replicas,
                 processes=processes)
    if cluster:
        check_namespace(namespace)
        if is_sentinel_url(redis_url):
            raise ConfigError("a Redis Cluster is not reached through Sentinel")
        if min_replicas:
            raise ConfigError("min_replicas is not available in cluster mode")
    if min_replicas < 0:
        raise ConfigError(f"min_replicas must not be negative, got {min_replicas}")
    if not min_replicas_timeout > 0:
        raise ConfigError(f"min_replicas_timeout must be positive, got {min_replicas_timeout}")


def check_shards(
    shards: Sequence[str],
    shard_map: Mapping[str, int],
    *,
    cluster: bool,
    min_replicas: int,
    processes: int,
) -> None:
    """Check ``shards`` and ``shard_map``.

    Raises:
        ConfigError: ``shards`` given as one string, a URL that is not a Redis or Sentinel
            URL, a URL listed twice, a map without shards or naming a shard that does not
            exist, or shards combined with cluster, ``min_replicas`` or ``processes > 1``.
    """
    if isinstance(shards, str):
        raise ConfigError("shards is a list of Redis URLs, not one string")
    for url in shards:
        if is_sentinel_url(url):
            SentinelUrl.parse(url)
        elif not url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(f"a shard must be a Redis URL, got {url!r}")
    if len(set(shards)) != len(shards):
        raise ConfigError("a shard URL is listed twice")
    for queue, index in shard_map.items():
        if not shards:
            raise ConfigError("shard_map needs shards")
        if isinstance(index, bool) or not isinstance(index, int) or not (
            0 <= index < len(shards)
        ):
            raise ConfigError(
                f"shard_map sends queue {queue!r} to shard {index!r}; shards are "
                f"0 to {len(shards) - 1}"
            )
    if shards and (cluster or min_replicas or processes > 1):
        raise ConfigError(
            "shards cannot be combined with cluster, min_replicas or processes > 1 yet"
        )


def parse_shard_map(text: str) -> dict[str, int]:
    """``"mail=0,reports=1"`` -> ``{"mail": 0, "reports": 1}`` (``RFETCH_SHARD_MAP``).

    Raises:
        ConfigError: a pair that is not ``queue=index``.
    """
    mapping: dict[str, int] = {}
    for pair in text.split(","):
        queue, equals, index = pair.strip().partition("=")
        if not equals or not queue.strip() or not index.strip().isdigit():
            raise ConfigError(f"RFETCH_SHARD_MAP wants queue=index pairs, got {pair!r}")
        mapping[queue.strip()] = int(index)
    return mapping
