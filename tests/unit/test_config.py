"""Config and QueueSpec: parsing, validation, Sidekiq's strict-order rule, the environment."""

from __future__ import annotations

from typing import Any

import pytest

from rfetch.config import DEFAULT_REDIS_URL, Config, QueueSpec
from rfetch.errors import ConfigError
from rfetch.worker.orphan_recovery import recovery_bound, stall_tolerance

# -- QueueSpec.parse ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "weight"),
    [
        ("default", "default", 1),
        ("critical,3", "critical", 3),
        ("  mail , 2", "mail", 2),
        ("low,1", "low", 1),
        ("a|b:c", "a|b:c", 1),
    ],
)
def test_queue_spec_parses_name_and_weight(text: str, name: str, weight: int) -> None:
    assert QueueSpec.parse(text) == QueueSpec(name, weight)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        (" ,2", "empty"),
        ("critical,0", "1 or more"),
        ("critical,-2", "1 or more"),
        ("critical,two", "whole number"),
        ("critical,1.5", "whole number"),
        ("critical,2,3", "whole number"),
    ],
)
def test_queue_spec_rejects_bad_names_and_weights(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        QueueSpec.parse(text)


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        QueueSpec.parse("q,x")


# -- Config.validate ------------------------------------------------------------------------


def test_defaults_follow_sidekiq() -> None:
    config = Config()
    assert config.redis_url == DEFAULT_REDIS_URL == "redis://localhost:6379/0"
    assert config.concurrency == 5
    assert [q.name for q in config.queues] == ["default"]
    assert config.shutdown_timeout == 25.0
    assert config.max_retries == 25
    assert config.dead_max_jobs == 10_000
    assert config.dead_timeout == 180 * 24 * 3600
    assert config.max_payload_bytes == 1024 * 1024
    assert 1.0 <= config.block_timeout <= 2.0


def test_default_orphan_recovery_bound_is_under_a_minute() -> None:
    """Defaults chosen for the recovery bound: a killed process's jobs are back within
    60 s, while a live process must miss its heartbeat for at least 30 s (six beats, as
    BullMQ's 30 s lock) before it can be reaped."""
    config = Config()
    assert (config.heartbeat_interval, config.heartbeat_ttl) == (5.0, 20)
    assert config.orphan_check_interval == 10.0
    assert recovery_bound(config) == 45.5
    assert recovery_bound(config) < 60
    assert stall_tolerance(config) == 30
    assert stall_tolerance(config) >= 6 * config.heartbeat_interval


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"queues": ()}, "at least one queue"),
        ({"queues": (QueueSpec("a"), QueueSpec("a", 2))}, "listed twice"),
        ({"shutdown_timeout": -1}, "shutdown timeout"),
        ({"heartbeat_interval": 0}, "heartbeat"),
        ({"heartbeat_interval": 60, "heartbeat_ttl": 60}, "heartbeat TTL"),
        ({"max_retries": -1}, "max_retries"),
        ({"dead_max_jobs": -1}, "dead_max_jobs"),
        ({"max_payload_bytes": 63}, "max_payload_bytes"),
        ({"prefetch": -1}, "prefetch"),
        ({"block_timeout": 0}, "block_timeout"),
        ({"block_timeout": 5, "network_timeout": 5}, "block_timeout"),
        ({"namespace": ""}, "namespace"),
        ({"namespace": "a:b"}, "namespace"),
        ({"orphan_check_interval": 0}, "orphan"),
        ({"poison_max_recoveries": 0}, "poison"),
    ],
)
def test_validate_rejects_out_of_range_fields(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config(**changes)
    # replace() validates too, so a valid Config cannot be made invalid by a copy.
    with pytest.raises(ConfigError, match=message):
        Config().replace(**changes)


def test_validate_accepts_edge_values() -> None:
    config = Config(
        concurrency=1,
        shutdown_timeout=0,
        max_retries=0,
        dead_max_jobs=0,
        max_payload_bytes=64,
        prefetch=0,
        namespace="app",
    )
    assert config.namespace == "app"
    assert config.replace(concurrency=7).concurrency == 7
    assert config.concurrency == 1  # replace() made a copy


# -- strict order and prefetch ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("queues", "strict", "expected"),
    [
        (["default"], None, True),
        (["critical", "default", "low"], None, True),
        (["critical,1", "default,1"], None, True),
        (["critical,2", "default"], None, False),
        (["critical", "default,3"], None, False),
        (["critical,2", "default"], True, True),
        (["critical", "default"], False, False),
    ],
)
def test_is_strict_when_no_weight_above_one_unless_set(
    queues: list[str], strict: bool | None, expected: bool
) -> None:
    config = Config(queues=[QueueSpec.parse(q) for q in queues], strict=strict)
    assert config.is_strict is expected


@pytest.mark.parametrize(
    ("concurrency", "prefetch", "expected"), [(5, None, 5), (10, None, 10), (10, 0, 0), (4, 20, 20)]
)
def test_prefetch_count_defaults_to_concurrency(
    concurrency: int, prefetch: int | None, expected: int
) -> None:
    assert Config(concurrency=concurrency, prefetch=prefetch).prefetch_count == expected


# -- Config.from_env ------------------------------------------------------------------------


def test_from_env_empty_uses_default_redis_url() -> None:
    assert Config.from_env({}).redis_url == DEFAULT_REDIS_URL
    assert Config.from_env({"REDIS_URL": ""}).redis_url == DEFAULT_REDIS_URL


def test_from_env_reads_redis_url() -> None:
    config = Config.from_env({"REDIS_URL": "redis://cache.internal:6380/2"})
    assert config.redis_url == "redis://cache.internal:6380/2"


def test_from_env_defaults_to_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://from-os-environ:1/0")
    monkeypatch.setenv("RFETCH_CONCURRENCY", "3")
    config = Config.from_env()
    assert config.redis_url == "redis://from-os-environ:1/0"
    assert config.concurrency == 3


def test_from_env_parses_rfetch_variables() -> None:
    config = Config.from_env(
        {
            "RFETCH_NAMESPACE": "myapp",
            "RFETCH_CONCURRENCY": "12",
            "RFETCH_SHUTDOWN_TIMEOUT": "8.5",
            "RFETCH_TAG": "blue",
            "RFETCH_STRICT": "false",
            "RFETCH_HEARTBEAT_INTERVAL": "0.5",
            "RFETCH_HEARTBEAT_TTL": "3",
            "RFETCH_POLL_INTERVAL_AVERAGE": "0.25",
            "RFETCH_POLL_INITIAL_WAIT": "0",
            "RFETCH_MAX_RETRIES": "4",
            "RFETCH_BLOCK_TIMEOUT": "1",
            "RFETCH_PREFETCH": "2",
            "RFETCH_UNKNOWN_THING": "ignored",
        }
    )
    assert config.namespace == "myapp"
    assert config.concurrency == 12
    assert config.shutdown_timeout == 8.5
    assert config.tag == "blue"
    assert config.strict is False
    assert config.heartbeat_interval == 0.5
    assert config.heartbeat_ttl == 3
    assert config.poll_interval_average == 0.25
    assert config.poll_initial_wait == 0.0
    assert config.max_retries == 4
    assert config.block_timeout == 1.0
    assert config.prefetch_count == 2


@pytest.mark.parametrize(
    ("text", "expected"), [("1", True), ("true", True), ("YES", True), ("0", False), ("No", False)]
)
def test_from_env_parses_flags(text: str, expected: bool) -> None:
    assert Config.from_env({"RFETCH_STRICT": text}).strict is expected


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("RFETCH_CONCURRENCY", "ten"),
        ("RFETCH_CONCURRENCY", "2.5"),
        ("RFETCH_HEARTBEAT_INTERVAL", "soon"),
        ("RFETCH_MAX_RETRIES", "25x"),
        ("RFETCH_STRICT", "maybe"),
        ("RFETCH_BLOCK_TIMEOUT", "1s"),
    ],
)
def test_from_env_bad_value_names_the_variable(name: str, text: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Config.from_env({name: text})


def test_from_env_out_of_range_value_is_rejected() -> None:
    with pytest.raises(ConfigError, match="concurrency"):
        Config.from_env({"RFETCH_CONCURRENCY": "0"})


def test_from_env_overrides_win_and_none_is_ignored() -> None:
    env = {"REDIS_URL": "redis://env:1/0", "RFETCH_CONCURRENCY": "3", "RFETCH_TAG": "env"}
    config = Config.from_env(env, redis_url="redis://arg:2/0", concurrency=None, tag="arg")
    assert config.redis_url == "redis://arg:2/0"
    assert config.concurrency == 3
    assert config.tag == "arg"


def test_an_unusable_redis_url_is_a_config_error_without_its_password() -> None:
    with pytest.raises(ConfigError, match=r"must start with redis://.*got http://ops:\*\*\*@h/0"):
        Config(redis_url="http://ops:s3cret@h/0")
    with pytest.raises(ConfigError, match="not a valid URL: Port could not be cast") as caught:
        Config(redis_url="redis://ops:s3cret@h:port/0")
    assert "s3cret" not in str(caught.value)
    for url in ("redis://h:6380/1", "rediss://u:p@h/0", "unix:///tmp/redis.sock"):
        assert Config(redis_url=url).redis_url == url
