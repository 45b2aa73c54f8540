"""The unit tier touches no Redis: any attempt to connect to one fails the test.

A test that needs a Redis belongs in ``tests/integration`` (which starts a real redis-server).
The guard patches redis-py's connection setup (sync and asyncio), the one path every client,
pool and pipeline takes to open a socket, so a unit test that reaches Redis through rfetch's
own code (a client built from the default ``redis://localhost:6379/0``, say) fails as loudly
as one that asks for the ``r`` fixture.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis.asyncio.connection
import redis.connection

from tests.support.redis_server import RedisServer

ADVICE = "unit tests touch no Redis; a test that needs one belongs in tests/integration"


@pytest.fixture(autouse=True)
def no_redis(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Make every connection attempt raise, and fail the test afterwards even if the code
    under test caught the error (a background thread that survives every exception would)."""
    attempts: list[str] = []

    def refuse(self: redis.connection.AbstractConnection, *args: object, **kwargs: object) -> None:
        where = getattr(self, "host", None) or getattr(self, "path", "?")
        attempts.append(f"{where}:{getattr(self, 'port', '')}")
        pytest.fail(f"a unit test tried to connect to Redis at {attempts[-1]}: {ADVICE}")

    monkeypatch.setattr(redis.connection.AbstractConnection, "connect", refuse)
    monkeypatch.setattr(redis.connection.AbstractConnection, "connect_check_health", refuse)
    # redis.asyncio has connection classes of its own (the asyncio client's pushes)
    for name in ("connect", "connect_check_health"):
        monkeypatch.setattr(redis.asyncio.connection.AbstractConnection, name, refuse)
    yield
    if attempts:
        pytest.fail(f"a unit test tried to connect to Redis ({', '.join(attempts)}): {ADVICE}")


@pytest.fixture(scope="session")
def redis_server() -> RedisServer:
    """Refuses: the unit tier has no redis-server (this overrides ``tests/conftest.py``'s)."""
    pytest.fail(ADVICE)
