"""A worker warns once, at start, when Redis cannot keep rfetch's guarantees: no persistence,
or an eviction policy other than noeviction (Sidekiq warns about the latter)."""

from __future__ import annotations

import signal
from pathlib import Path

import redis

from tests.support.redis_server import RedisServer
from tests.support.workers import WorkerProcess

NO_PERSISTENCE = "Redis has no persistence"
EVICTION = "Redis evicts keys under memory pressure"


def started_log(server: RedisServer, client: redis.Redis, tmp_path: Path) -> str:
    """The log of a worker on ``server`` once it beats, after a clean stop."""
    proc = WorkerProcess(server.url, ["-r", "testjobs", "-c", "1", "-t", "1"], {}, tmp_path)
    try:
        proc.identity(client)
    finally:
        proc.signal(signal.SIGTERM)
        assert proc.wait(15) == 0, proc.log()
    return proc.log()


def test_no_persistence_is_warned_about_once(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    # The session's server runs with --save "" and --appendonly no.
    log = started_log(redis_server, r, tmp_path)
    assert log.count(NO_PERSISTENCE) == 1, log
    assert EVICTION not in log, log


def test_an_evicting_policy_is_warned_about_once(own_redis: RedisServer, tmp_path: Path) -> None:
    client = own_redis.client()
    client.config_set("maxmemory-policy", "allkeys-lru")
    log = started_log(own_redis, client, tmp_path)
    assert log.count(EVICTION) == 1, log
    assert "allkeys-lru" in log
    assert NO_PERSISTENCE not in log, log  # this server writes an append-only file


def test_a_persistent_noeviction_redis_gets_no_warning(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    log = started_log(own_redis, own_redis.client(), tmp_path)
    assert NO_PERSISTENCE not in log and EVICTION not in log, log
