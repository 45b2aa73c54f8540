"""Parsing of ``redis+sentinel://`` URLs and the Sentinel-related Config checks."""

from __future__ import annotations

import pytest

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.formatting import safe_url
from rfetch.store.sentinel import SentinelUrl


def test_full_url() -> None:
    parsed = SentinelUrl.parse("redis+sentinel://app:s%40cret@h1:26379,h2:26380,h3/mymaster/2")
    assert parsed.sentinels == (("h1", 26379), ("h2", 26380), ("h3", 26379))
    assert parsed.master == "mymaster"
    assert parsed.db == 2
    assert (parsed.username, parsed.password) == ("app", "s@cret")


def test_db_defaults_to_0_and_password_only() -> None:
    parsed = SentinelUrl.parse("redis+sentinel://:pw@h1/mymaster")
    assert parsed.db == 0
    assert (parsed.username, parsed.password) == (None, "pw")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel://h1:26379", "names the master after the hosts"),
        ("redis+sentinel://h1:26379/", "names the master after the hosts"),
        ("redis+sentinel:///mymaster", "empty host"),
        ("redis+sentinel://h1,,h2/mymaster", "empty host"),
        ("redis+sentinel://h1:port/mymaster", "bad sentinel port 'port'"),
        ("redis+sentinel://h1:70000/mymaster", "bad sentinel port '70000'"),
        ("redis+sentinel://h1/mymaster/zero", "whole number"),
        ("redis+sentinel://h1/mymaster/0/1", "whole number"),
        ("redis+sentinel://h1/mymaster?x=1", "no query"),
    ],
)
def test_malformed_urls_are_config_errors(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SentinelUrl.parse(url)
    with pytest.raises(ConfigError, match=message):
        Config(redis_url=url)


def test_error_messages_hide_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        SentinelUrl.parse("redis+sentinel://u:topsecret@h1:x/m")
    assert "topsecret" not in str(caught.value)
    assert safe_url("redis+sentinel://u:topsecret@h1,h2/m/0") == "redis+sentinel://u:***@h1,h2/m/0"


def test_min_replicas_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="min_replicas must not be negative"):
        Config(min_replicas=-1)
    with pytest.raises(ConfigError, match="min_replicas_timeout must be positive"):
        Config(min_replicas=1, min_replicas_timeout=0)
    env = {"RFETCH_MIN_REPLICAS": "1", "RFETCH_MIN_REPLICAS_TIMEOUT": "0.5"}
    config = Config.from_env(env)
    assert (config.min_replicas, config.min_replicas_timeout) == (1, 0.5)
