"""The one loader of the Lua scripts in ``rfetch/lua/``.

redis-py's :class:`redis.commands.core.Script` runs EVALSHA and falls back to EVAL on
NOSCRIPT, so a Redis restart (which empties the script cache) costs one extra round trip.

A line ``-- #include <name>`` in a script is replaced by ``rfetch/lua/lib/<name>.lua`` when
the script is read, so rules shared by several scripts (the ordering-key gate) are written
once. A library may include the libraries it needs the same way (``lib/gate.lua`` includes
``lib/keys.lua``); each library is put in once, at its first include, before what needs it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from importlib import resources

from redis import Redis
from redis.commands.core import Script

_INCLUDE = re.compile(r"^-- #include (\w+)$", re.MULTILINE)


def read_script(name: str) -> str:
    """Source of ``rfetch/lua/<name>.lua`` with its ``-- #include`` lines expanded.

    Raises:
        FileNotFoundError: no such script or included library.
    """
    lua = resources.files("rfetch").joinpath("lua")
    seen: set[str] = set()

    def expand(text: str) -> str:
        def library(match: re.Match[str]) -> str:
            lib = match.group(1)
            if lib in seen:
                return ""
            seen.add(lib)
            return expand(lua.joinpath("lib").joinpath(f"{lib}.lua").read_text("utf-8"))

        return _INCLUDE.sub(library, text)

    return expand(lua.joinpath(f"{name}.lua").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Scripts:
    """Every script, registered on one Redis client. Only
    :class:`rfetch.store.commands.Commands` calls them: it alone knows their KEYS and ARGV."""

    fetch: Script
    requeue: Script
    settle: Script
    finish: Script
    coalesce: Script
    lease: Script
    rescue: Script
    recover: Script
    unlock: Script
    enqueue_due: Script
    push: Script
    api_find: Script
    api_move: Script
    leader_claim: Script
    leader_resign: Script
    periodic_sync: Script
    periodic_push: Script
    periodic_skip: Script
    batch_push: Script
    complete: Script
    depend: Script
    cancel_waiting: Script
    abandon: Script
    push_once: Script
    checkpoint: Script

    @classmethod
    def load(cls, redis: Redis) -> Scripts:
        """Register every script on ``redis`` (no round trip until first use)."""
        return cls(**{f.name: redis.register_script(read_script(f.name)) for f in fields(cls)})


@dataclass(frozen=True)
class LimiterScripts:
    """The limiter scripts (``lua/limiter_*.lua``), registered on one Redis client. Only
    :class:`rfetch.store.limiter_commands.LimiterCommands` calls them."""

    limiter_window: Script
    limiter_rate: Script
    limiter_concurrent: Script

    @classmethod
    def load(cls, redis: Redis) -> LimiterScripts:
        """Register every limiter script on ``redis`` (no round trip until first use)."""
        return cls(**{f.name: redis.register_script(read_script(f.name)) for f in fields(cls)})
