"""Shared fixtures: a private redis-server for the session, flushed before each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from rfetch.config import Config
from tests.support.redis_server import RedisServer

pytest_plugins = ["tests.support.gate_worker", "tests.support.worker_fixtures"]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def r(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A client of the session server, flushed before the test."""
    client = redis_server.client()
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test alone, which it may stop, kill and restart (AOF on)."""
    server = RedisServer(appendonly=True)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def config(redis_server: RedisServer, r: redis.Redis) -> Config:
    return Config(redis_url=redis_server.url)
