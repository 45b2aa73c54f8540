"""Shared fixtures: a private redis-server for the session, flushed before each test."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from rfetch.config import Config
from tests.support.bytecode import cache_outside_the_tree
from tests.support.redis_server import RedisServer

# tests/django_app holds Django TestCases that Django's own runner runs, in a subprocess with
# its settings (tests/integration/test_django.py); pytest would import them unconfigured.
collect_ignore = ["django_app"]

pytest_plugins = ["tests.support.gate_worker", "tests.support.worker_fixtures"]
if importlib.util.find_spec("sentry_sdk") is not None:
    # The Sentry tests' recording transport; the unit group that scripts/test-versions
    # installs on the other Pythons has no sentry-sdk (and no test that needs it).
    pytest_plugins.append("tests.support.sentry")


def pytest_configure(config: pytest.Config) -> None:
    """Bytecode cached outside the tree where ``PYTHONDONTWRITEBYTECODE`` is set
    (``tests/support/bytecode.py``), before pytest-xdist starts its processes."""
    cache_outside_the_tree()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``pytest -n N`` and xdist's default ``--dist load``: one test at a time to a free
    process, the tests sharing a cluster, a Sentinel set or the browser kept together
    (``tests/support/xdist_schedule.py``). Another ``--dist`` is left to xdist."""
    if config.getvalue("dist") != "load":
        return None
    from tests.support.xdist_schedule import SharedSetupScheduling

    return SharedSetupScheduling(config, log)


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
