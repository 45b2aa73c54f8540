"""Reading a :class:`rfetch.config.Config`'s fields from the environment
(``Config.from_env``): ``REDIS_URL`` and ``RFETCH_<FIELD>`` for every number, text or flag
field, the shard map and the queue size limits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rfetch.errors import ConfigError
from rfetch.store.topology import parse_shard_map


def env_values(env: Mapping[str, str], default_redis_url: str) -> dict[str, Any]:
    """The Config fields the environment sets, parsed (``REDIS_URL``, else
    ``default_redis_url``).

    Raises:
        ConfigError: a variable that does not parse as its field's type.
    """
    values: dict[str, Any] = {"redis_url": env.get("REDIS_URL") or default_redis_url}
    for name, kind in _SCALAR_FIELDS.items():
        text = env.get(f"RFETCH_{name.upper()}")
        if text:
            values[name] = _parse_scalar(name, kind, text)
    if env.get("RFETCH_SHARDS"):
        values["shards"] = tuple(env["RFETCH_SHARDS"].split())
    if env.get("RFETCH_SHARD_MAP"):
        values["shard_map"] = parse_shard_map(env["RFETCH_SHARD_MAP"])
    if env.get("RFETCH_MAX_QUEUE_SIZE"):
        try:
            values["max_queue_size"] = parse_shard_map(env["RFETCH_MAX_QUEUE_SIZE"])
        except ConfigError:
            raise ConfigError(
                "RFETCH_MAX_QUEUE_SIZE wants queue=size pairs, e.g. 'mail=10000,reports=500'"
            ) from None
    return values


_SCALAR_FIELDS: dict[str, str] = {
    "sentinel_password": "str",
    "min_replicas": "int",
    "min_replicas_timeout": "float",
    "min_replicas_acks": "bool",
    "cluster": "bool",
    "namespace": "str",
    "concurrency": "int",
    "async_concurrency": "int",
    "shutdown_timeout": "float",
    "tag": "str",
    "strict": "bool",
    "heartbeat_interval": "float",
    "heartbeat_ttl": "int",
    "poll_interval_average": "float",
    "poll_initial_wait": "float",
    "max_retries": "int",
    "dead_max_jobs": "int",
    "dead_timeout": "float",
    "max_payload_bytes": "int",
    "prefetch": "int",
    "prefetch_horizon": "float",
    "block_timeout": "float",
    "network_timeout": "float",
    "orphan_check_interval": "float",
    "orphan_full_scan_interval": "float",
    "poison_max_recoveries": "int",
    "poison_window": "float",
    "push_buffer_size": "int",
    "push_spool": "str",
    "push_exit_timeout": "float",
    "cpu_affinity": "str",
    "processes": "int",
    "max_memory": "int",
    "max_jobs": "int",
    "job_timeout": "float",
    "job_timeout_grace": "float",
    "leader_ttl": "float",
}


def _parse_scalar(name: str, kind: str, text: str) -> Any:
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "bool":
            if text.lower() in ("1", "true", "yes"):
                return True
            if text.lower() in ("0", "false", "no"):
                return False
            raise ValueError(text)
    except ValueError:
        raise ConfigError(f"RFETCH_{name.upper()}={text!r} is not a valid {kind}") from None
    return text
