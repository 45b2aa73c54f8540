"""``connect_async`` builds the asyncio client of the Config's topology, as ``connect``
does for threads: a server, the master behind Sentinel, or a Redis Cluster. Nothing here
connects (redis-py's asyncio clients connect at their first command)."""

from __future__ import annotations

import pytest
import redis.asyncio
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.sentinel import SentinelConnectionPool

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.store.connection import connect_async


def test_a_sentinel_url_gives_the_asyncio_sentinel_client_of_the_master() -> None:
    url = "redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2/mymaster/2"
    client = connect_async(Config(redis_url=url, min_replicas=1))
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.service_name == "mymaster"
    hosts = [(s.connection_pool.connection_kwargs["host"],
              s.connection_pool.connection_kwargs["port"]) for s in pool.sentinel_manager.sentinels]
    assert hosts == [("10.0.0.1", 26379), ("10.0.0.2", 26379)]
    assert pool.connection_kwargs["db"] == 2
    assert pool.connection_kwargs["password"] == "secret"


def test_cluster_mode_gives_the_asyncio_cluster_client() -> None:
    config = Config(redis_url="redis://10.0.0.1:7000/0", cluster=True, namespace="{app}")
    assert isinstance(connect_async(config), RedisCluster)


def test_a_plain_url_gives_a_plain_client() -> None:
    client = connect_async(Config(redis_url="redis://10.0.0.1:6390/0"))
    assert type(client) is redis.asyncio.Redis


def test_shards_need_one_shards_config() -> None:
    config = Config(shards=["redis://10.0.0.1:6390/0", "redis://10.0.0.2:6390/0"])
    with pytest.raises(ConfigError, match="give one shard's Config"):
        connect_async(config)
