"""What the web UI added to rfetch.api: entries at a score, and the Redis server's INFO."""

from __future__ import annotations

import redis

from rfetch.api import Api, RedisInfo
from tests.support.seed import jid_of
from tests.support.web import failed


def test_at_score_returns_every_entry_with_that_score(api: Api, r: redis.Redis) -> None:
    r.zadd("retry", {failed(jid_of(1)): 1.5, failed(jid_of(2)): 2.25, failed(jid_of(3)): 2.25,
                     b"garbage": 2.25, failed(jid_of(4)): 3})
    found = api.retries.at_score(2.25)
    assert sorted(str(j.jid) for j in found if j.jid) == [jid_of(2), jid_of(3)]
    assert len(found) == 3
    assert all(j.score == 2.25 and j.location == "retry" for j in found)
    assert sorted(j.position or 0 for j in found) == [1, 2, 3]  # ranks
    assert api.retries.at_score(9.0) == []
    assert api.retries.fetch(2.25, jid_of(3)) is not None  # fetch still works through it
    assert api.retries.fetch(2.25, jid_of(1)) is None


def test_redis_info(api: Api, r: redis.Redis) -> None:
    info = api.redis_info()
    assert isinstance(info, RedisInfo)
    assert info.version == r.info("server")["redis_version"]
    assert info.connected_clients >= 1
    assert info.used_memory > 0
    assert info.uptime_seconds >= 0
    assert info.to_dict()["evicts"] is info.evicts
    r.config_set("maxmemory-policy", "allkeys-lru")
    try:
        assert api.redis_info().evicts
    finally:
        r.config_set("maxmemory-policy", "noeviction")
    assert not api.redis_info().evicts


def test_api_with_a_decoding_client(redis_server: object, r: redis.Redis) -> None:
    from tests.support.redis_server import RedisServer

    assert isinstance(redis_server, RedisServer)
    client = redis_server.client(decode_responses=True)
    api = Api(redis=client)
    r.zadd("dead", {failed(jid_of(1)): 7.0})
    (record,) = api.dead.at_score(7.0)
    assert record.jid == jid_of(1)
    assert api.redis_info().version
    # The web UI reads and acts the same through such a client.
    from werkzeug.test import Client

    from rfetch.web import create_app
    from tests.support.web import flash, post

    web = Client(create_app(api=api, basic_auth=False))
    assert jid_of(1) in web.get("/dead").get_data(as_text=True)
    response = post(web, "/dead", {"action": "retry", "scope": "matching"}, page="/dead")
    assert "Retried: 1 job(s)." in flash(web, response)
    assert r.llen("queue:default") == 1
    client.close()
