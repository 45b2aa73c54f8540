"""The checks of :class:`rfetch.config.Config`'s fields that need more than a comparison:
the Redis URL, the topology (Sentinel, cluster, replicas, shards), the queue size limits, the
swarm's recycling limits and the job time limits. Each raises ConfigError naming the field."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from rfetch.errors import ConfigError
from rfetch.formatting import safe_url
from rfetch.store.sentinel import is_sentinel_url
from rfetch.store.topology import check_topology


def check_redis_url(url: str) -> None:
    """Raise ConfigError, with the password hidden, for a URL redis-py cannot use."""
    if is_sentinel_url(url):  # several hosts: checked by SentinelUrl.parse
        return
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        raise ConfigError(f"redis_url {safe_url(url)} is not a valid URL: {exc}") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(
            f"redis_url must start with redis://, rediss:// or unix://, got {safe_url(url)}"
        )


def check_redis(
    redis_url: str,
    *,
    cluster: bool,
    namespace: str | None,
    min_replicas: int,
    min_replicas_timeout: float,
    min_replicas_acks: bool,
    shards: Sequence[str],
    shard_map: Mapping[str, int],
    processes: int,
) -> None:
    """Check the topology settings (``check_topology``) and ``min_replicas_acks``.

    Raises:
        ConfigError: naming the setting that is wrong.
    """
    check_topology(
        redis_url, cluster=cluster, namespace=namespace,
        min_replicas=min_replicas, min_replicas_timeout=min_replicas_timeout,
        shards=shards, shard_map=shard_map, processes=processes,
    )
    if min_replicas_acks and min_replicas < 1:
        raise ConfigError("min_replicas_acks needs min_replicas of 1 or more")


def check_limits(
    *,
    max_queue_size: Mapping[str, int],
    processes: int,
    max_memory: int | None,
    max_jobs: int | None,
    job_timeout: float | None,
    job_timeout_grace: float,
) -> None:
    """Check the queue size limits, the swarm's limits and the job time limits.

    Raises:
        ConfigError: naming the setting that is out of range.
    """
    for queue, size in max_queue_size.items():
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(
                f"max_queue_size of queue {queue!r} must be a whole number of jobs >= 1, "
                f"got {size!r}"
            )
    if processes < 1:
        raise ConfigError(f"processes must be 1 or more, got {processes}")
    for name, value in (("max_memory", max_memory), ("max_jobs", max_jobs)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be 1 or more (or unset), got {value}")
    if job_timeout is not None and not job_timeout > 0:
        raise ConfigError(f"job_timeout must be positive (or unset), got {job_timeout}")
    if not job_timeout_grace >= 0:
        raise ConfigError(
            f"job_timeout_grace must not be negative, got {job_timeout_grace}"
        )


AUTO = "auto"
"""Pin to one CPU chosen by slot files."""

ADAPTIVE = "adaptive"
"""As ``auto`` at start, then moved between that CPU and every allowed CPU by what the
jobs need (:mod:`rfetch.worker.adaptive_affinity`; the default)."""

NONE = "none"
"""Leave placement to the kernel."""


def parse_cpu_list(text: str) -> frozenset[int]:
    """Parse a CPU list in the kernel's format (``taskset -c``, ``Cpus_allowed_list``):
    ``"3"``, ``"0,2"``, ``"0-3,8-11"``.

    Raises:
        ConfigError: the text is not such a list, or a range runs backwards.
    """
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        low_text, dash, high_text = part.partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if dash else low
        except ValueError:
            raise ConfigError(
                f"cpu_affinity must be 'adaptive', 'auto', 'none' or a CPU list such as '0' or "
                f"'0-3,6', "
                f"got {text!r}"
            ) from None
        if low < 0 or high < low:
            raise ConfigError(f"cpu_affinity: {part!r} is not a CPU range (in {text!r})")
        cpus.update(range(low, high + 1))
    return frozenset(cpus)


def check_cpu_affinity(text: str) -> None:
    """Raise ConfigError unless ``text`` is ``adaptive``, ``auto``, ``none`` or a CPU list."""
    if text not in (ADAPTIVE, AUTO, NONE):
        parse_cpu_list(text)
