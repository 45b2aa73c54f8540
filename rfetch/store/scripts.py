"""The one loader of the Lua scripts in ``rfetch/lua/``.

The scripts of :class:`Scripts` run as one Redis Functions library (``FCALL``; Redis 7+),
whose shared prelude runs once per ``FUNCTION LOAD`` instead of once per call, with
EVALSHA as the fallback (Redis < 7, a pipeline, a refused ``FCALL``):
:mod:`rfetch.store.functions`. redis-py's :class:`redis.commands.core.Script` runs EVALSHA
and falls back to EVAL on NOSCRIPT, so a Redis restart (which empties the script cache)
costs one extra round trip; a missing library is loaded again the same way.

A line ``-- #include <name>`` in a script is replaced by ``rfetch/lua/lib/<name>.lua`` when
the script is read, so rules shared by several scripts (the ordering-key gate) are written
once. A library may include the libraries it needs the same way (``lib/gate.lua`` includes
``lib/keys.lua``); each library is put in once, at its first include, before what needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from importlib import resources

from redis import Redis
from redis.commands.core import Script

from rfetch.store.functions import Library, LuaScript, expand, library_source


@cache
def _lua_text(name: str) -> str:
    """The text of ``rfetch/lua/<name>.lua`` as written (its includes not expanded), read
    once per process (each library is included by many scripts)."""
    return resources.files("rfetch").joinpath("lua").joinpath(f"{name}.lua").read_text("utf-8")


def _lib_text(name: str) -> str:
    """The text of the shared library ``rfetch/lua/lib/<name>.lua``."""
    return _lua_text(f"lib/{name}")


@cache
def read_script(name: str) -> str:
    """Source of ``rfetch/lua/<name>.lua`` with its ``-- #include`` lines expanded, built
    once per process (reading and expanding every script was most of building a client).

    Raises:
        FileNotFoundError: no such script or included library.
    """
    return expand(_lua_text(name), set(), _lib_text)


@cache
def script_library(names: tuple[str, ...]) -> tuple[str, str]:
    """The Functions library of the scripts ``names`` (``rfetch/lua/<name>.lua``), as
    (library name, source); built once per process."""
    return library_source([(name, _lua_text(name)) for name in names], _lib_text)


@dataclass(frozen=True)
class Scripts:
    """Every script, registered on one Redis client, as one Functions library
    (:mod:`rfetch.store.functions`). Only :class:`rfetch.store.commands.Commands` calls
    them: it alone knows their KEYS and ARGV."""

    fetch: LuaScript
    mark_fetched: LuaScript
    requeue: LuaScript
    settle: LuaScript
    finish: LuaScript
    coalesce: LuaScript
    lease: LuaScript
    rescue: LuaScript
    recover: LuaScript
    unlock: LuaScript
    enqueue_due: LuaScript
    push: LuaScript
    push_plain: LuaScript
    api_find: LuaScript
    api_move: LuaScript
    leader_claim: LuaScript
    leader_resign: LuaScript
    periodic_sync: LuaScript
    periodic_push: LuaScript
    periodic_skip: LuaScript
    batch_push: LuaScript
    complete: LuaScript
    depend: LuaScript
    cancel_waiting: LuaScript
    abandon: LuaScript
    push_once: LuaScript
    checkpoint: LuaScript

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The scripts' names, in the library's order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def load(cls, redis: Redis) -> Scripts:
        """Register every script on ``redis`` (no round trip until first use: the library
        is loaded by the first call that finds it missing)."""
        library = Library(*script_library(cls.names()))
        return cls(**{
            name: LuaScript(name, library, redis.register_script(read_script(name)))
            for name in cls.names()
        })


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
