"""Two private redis-servers for sharding tests (``Config.shards``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.redis_server import RedisServer


@contextmanager
def two_servers() -> Iterator[tuple[RedisServer, RedisServer]]:
    """Start two redis-servers (AOF on, so a stopped one restarts with its data); stop
    and remove both afterwards."""
    first, second = RedisServer(appendonly=True), RedisServer(appendonly=True)
    first.start()
    try:
        second.start()
        try:
            yield first, second
        finally:
            second.cleanup()
    finally:
        first.cleanup()
