"""Routing of queues to shards, and the shard settings."""

from __future__ import annotations

import zlib

import pytest

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.push.shards import queues_by_shard, shard_config, shard_of

URLS = ("redis://a:6379/0", "redis://b:6379/0", "redis://c:6379/0")


def test_explicit_map_first_then_a_stable_hash() -> None:
    config = Config(shards=URLS, shard_map={"mail": 2})
    assert shard_of(config, "mail") == 2
    # CRC-32 of the name: the same on every host and Python run (no hash randomisation).
    assert shard_of(config, "reports") == zlib.crc32(b"reports") % 3
    assert shard_of(config, "reports") == shard_of(Config(shards=URLS), "reports")
    assert shard_of(Config(), "anything") == 0


def test_queues_grouped_and_a_shard_config_is_an_ordinary_config() -> None:
    config = Config(shards=URLS[:2], shard_map={"a": 1, "b": 0, "c": 1})
    assert queues_by_shard(config, ["a", "b", "c"]) == {1: ["a", "c"], 0: ["b"]}
    one = shard_config(config, 1)
    assert (one.redis_url, one.shards, one.shard_map) == (URLS[1], (), {})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"shards": "redis://a"}, "list of Redis URLs"),
        ({"shards": ("http://a",)}, "must be a Redis URL"),
        ({"shards": (URLS[0], URLS[0])}, "listed twice"),
        ({"shard_map": {"q": 0}}, "needs shards"),
        ({"shards": URLS[:2], "shard_map": {"q": 2}}, "shards are 0 to 1"),
        ({"shards": URLS[:2], "processes": 2}, "cannot be combined"),
    ],
)
def test_bad_shard_settings(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config(**fields)  # type: ignore[arg-type]


def test_from_env() -> None:
    config = Config.from_env({"RFETCH_SHARDS": f"{URLS[0]} {URLS[1]}",
                              "RFETCH_SHARD_MAP": "mail=1, reports=0"})
    assert config.shards == URLS[:2]
    assert config.shard_map == {"mail": 1, "reports": 0}
    with pytest.raises(ConfigError, match="queue=index"):
        Config.from_env({"RFETCH_SHARDS": URLS[0], "RFETCH_SHARD_MAP": "mail"})


def test_each_shard_leader_gets_the_periodic_jobs_of_its_queues() -> None:
    from rfetch.jobs.schedule import PeriodicRegistry
    from rfetch.worker.shards import _on_shard

    config = Config(shards=URLS[:2], shard_map={"mail": 0, "reports": 1})
    registry = PeriodicRegistry()
    registry.register("0 3 * * *", "Report", name="nightly", queue="reports")
    registry.register("*/5 * * * *", "Mail", name="mailer", queue="mail")
    assert [s.name for s in registry.select(_on_shard(config, 0))] == ["mailer"]
    assert [s.name for s in registry.select(_on_shard(config, 1))] == ["nightly"]
