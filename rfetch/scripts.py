"""The Lua scripts in ``rfetch/lua/``, loaded once per Redis client.

redis-py's :class:`redis.commands.core.Script` runs EVALSHA and falls back to EVAL on
NOSCRIPT, so a Redis restart (which empties the script cache) costs one extra round trip.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from redis import Redis
from redis.commands.core import Script


def read_script(name: str) -> str:
    """Source of ``rfetch/lua/<name>.lua``."""
    source = resources.files("rfetch").joinpath("lua").joinpath(f"{name}.lua")
    return source.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Scripts:
    """Every script, registered on one Redis client."""

    fetch: Script
    requeue: Script
    settle: Script
    enqueue_due: Script
    recover: Script
    unlock: Script

    @classmethod
    def load(cls, redis: Redis) -> Scripts:
        """Register the scripts on ``redis`` (no round trip until first use)."""
        return cls(
            **{name: redis.register_script(read_script(name)) for name in cls.__dataclass_fields__}
        )
