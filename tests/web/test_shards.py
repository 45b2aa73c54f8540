"""The web UI over two shards (``Config.shards``), each a real redis-server: one merged
view that names each row's shard, figures that are the sums of the shards, every action
sent to the shard of its job, queue or process, and a shard that is down shown as down
while the other's data still shows."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from werkzeug.test import Client

from rfetch.api import Api, JobRecord
from rfetch.config import Config
from rfetch.push.shards import shard_config
from rfetch.web import create_app
from rfetch.web.formatting import entry_key
from tests.support.redis_server import RedisServer
from tests.support.seed import jid_of
from tests.support.shards import two_servers
from tests.support.web import WebProcess, add_process, failed, flash, payload, post, text

SHARD_MAP = {"alpha": 0, "beta": 1}


@pytest.fixture
def servers() -> Iterator[tuple[RedisServer, RedisServer]]:
    with two_servers() as pair:
        yield pair


@pytest.fixture
def config(servers: tuple[RedisServer, RedisServer]) -> Config:
    return Config(shards=tuple(s.url for s in servers), shard_map=SHARD_MAP,
                  network_timeout=1.0, block_timeout=0.5)


@pytest.fixture
def reds(servers: tuple[RedisServer, RedisServer]) -> list[redis.Redis]:
    return [s.client() for s in servers]


@pytest.fixture
def client(config: Config) -> Client:
    return Client(create_app(config, basic_auth=False))


def seed(reds: list[redis.Redis]) -> None:
    """alpha (3 jobs) and default (1) on shard 0, beta (2) and default (2) on shard 1;
    retries on both, interleaved in time; counters on both."""
    first, second = reds
    first.sadd("queues", "alpha", "default")
    first.lpush("queue:alpha", *[payload(jid_of(i), queue="alpha") for i in (1, 2, 3)])
    first.lpush("queue:default", payload(jid_of(4)))
    second.sadd("queues", "beta", "default")
    second.lpush("queue:beta", *[payload(jid_of(i), queue="beta") for i in (5, 6)])
    second.lpush("queue:default", *[payload(jid_of(i)) for i in (7, 8)])
    first.zadd("retry", {failed(jid_of(11), queue="alpha"): 1000.0,
                         failed(jid_of(13), queue="alpha", retry_count=3): 3000.0})
    second.zadd("retry", {failed(jid_of(12), queue="beta", retry_count=1): 2000.0})
    second.zadd("dead", {failed(jid_of(14), queue="beta"): 4000.0})
    first.set("stat:processed", 10)
    first.set("stat:failed", 2)
    second.set("stat:processed", 5)
    second.set("stat:failed", 1)


def rows(body: str, table: str) -> list[str]:
    """The ``data-shard`` of each row of a table, in order."""
    section = body.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<tr[^>]*data-shard="(\d+)"', section)


def record(r: redis.Redis, key: str, score: float) -> JobRecord:
    [(raw, found)] = r.zrangebyscore(key, score, score, withscores=True)
    return JobRecord.parse(raw, key, found)


def test_stats_are_the_sums_of_the_shards(
    client: Client, config: Config, reds: list[redis.Redis],
) -> None:
    seed(reds)
    stats = json.loads(client.get("/stats.json").get_data())
    shard_stats = [Api(shard_config(config, i)).stats() for i in (0, 1)]
    for name in ("processed", "failed", "enqueued", "retry_size", "dead_size",
                 "scheduled_size", "processes", "busy"):
        assert stats[name] == sum(getattr(s, name) for s in shard_stats), name
    assert (stats["enqueued"], stats["processed"], stats["retry_size"]) == (8, 15, 3)
    body = text(client.get("/"))
    assert 'id="shards"' in body
    assert body.count('badge badge-running">up<') == 2
    assert 'data-stat="enqueued">8<' in body


def test_queues_page_names_each_queues_shard_and_actions_go_to_it(
    client: Client, reds: list[redis.Redis],
) -> None:
    seed(reds)
    body = text(client.get("/queues"))
    # default is on both shards: one row each; alpha and beta on their own shard.
    assert rows(body, "queues") == ["0", "1", "0", "1"]
    assert "/queues/beta?shard=1" in body
    assert 'name="shard" value="1"' in body
    # A queue's page without ?shard= reads the queue's own shard (shard_map).
    assert jid_of(5) in text(client.get("/queues/beta"))
    assert jid_of(7) in text(client.get("/queues/default?shard=1"))
    assert jid_of(7) not in text(client.get("/queues/default?shard=0"))
    post(client, "/queues/default", {"action": "pause", "shard": "1"})
    assert reds[1].smembers("paused") == {b"default"}
    assert not reds[0].exists("paused")
    response = post(client, "/queues/default", {"action": "clear", "shard": "0"})
    assert "1 job(s) deleted" in flash(client, response)
    assert not reds[0].exists("queue:default")
    assert reds[1].llen("queue:default") == 2
    assert post(client, "/queues/default", {"action": "pause", "shard": "7"}).status_code == 400


def test_a_merged_set_is_in_time_order_and_each_action_goes_to_its_shard(
    client: Client, reds: list[redis.Redis],
) -> None:
    seed(reds)
    body = text(client.get("/retries"))
    assert rows(body, "jobs") == ["0", "1", "0"]  # 1000 (shard 0), 2000 (1), 3000 (0)
    assert body.index(jid_of(11)) < body.index(jid_of(12)) < body.index(jid_of(13))
    assert rows(text(client.get("/retries?sort=retry_count")), "jobs") == ["0", "1", "0"]
    assert rows(text(client.get("/retries?order=desc&limit=25")), "jobs") == ["0", "1", "0"]
    second = text(client.get("/retries?limit=2&offset=2"))
    assert jid_of(13) in second and jid_of(11) not in second

    key = entry_key(record(reds[1], "retry", 2000.0))
    assert f'value="1:{key}"' in body
    assert f"/retries/{key}?shard=1" in body
    assert jid_of(12) in text(client.get(f"/retries/{key}?shard=1"))
    assert client.get(f"/retries/{key}?shard=0").status_code == 404

    response = post(client, "/retries", {"single": f"retry:1:{key}"}, page="/retries")
    assert "Retried: 1 job(s)." in flash(client, response)
    assert reds[1].zcard("retry") == 0
    newest = reds[1].lindex("queue:beta", 0)
    assert newest is not None and json.loads(newest)["jid"] == jid_of(12)
    assert reds[0].zcard("retry") == 2  # shard 0 untouched

    keys = [f"0:{entry_key(record(reds[0], 'retry', s))}" for s in (1000.0, 3000.0)]
    response = post(client, "/retries", {"action": "kill", "key": keys}, page="/retries")
    assert "Killed (moved to the dead set): 2 job(s)." in flash(client, response)
    assert reds[0].zcard("dead") == 2
    assert reds[1].zcard("dead") == 1

    response = post(client, "/dead", {"action": "delete", "scope": "matching",
                                      "class": "app.Mail"}, page="/dead")
    assert "Deleted: 3 job(s)." in flash(client, response)
    assert reds[0].zcard("dead") == reds[1].zcard("dead") == 0
    bad = post(client, "/retries", {"action": "delete", "key": ["1000.0-0123456789abcdef"]},
               page="/retries")
    assert bad.status_code == 400  # a merged page's key must name its shard


def test_one_entrys_page_and_its_actions_are_on_the_shard_it_names(
    client: Client, reds: list[redis.Redis],
) -> None:
    seed(reds)
    reds[1].zadd("schedule", {payload(jid_of(31), queue="beta"): 4_102_444_800.0})
    key = entry_key(record(reds[1], "schedule", 4_102_444_800.0))
    page = text(client.get(f"/scheduled/{key}?shard=1"))
    assert jid_of(31) in page
    assert 'name="shard" value="1"' in page  # its action form names the shard
    response = post(client, f"/scheduled/{key}", {"action": "add_to_queue", "shard": "1"},
                    page=f"/scheduled/{key}?shard=1")
    assert "Added to their queue: 1 job(s)." in flash(client, response)
    assert reds[1].zcard("schedule") == 0
    newest = reds[1].lindex("queue:beta", 0)
    assert newest is not None and json.loads(newest)["jid"] == jid_of(31)
    assert not reds[0].exists("queue:beta")
    dead_key = entry_key(record(reds[1], "dead", 4000.0))
    response = post(client, "/dead", {"single": f"retry:1:{dead_key}"}, page="/dead")
    assert "Retried: 1 job(s)." in flash(client, response)
    assert reds[1].zcard("dead") == 0


def test_busy_lists_every_shards_processes_and_quiet_reaches_each(
    client: Client, reds: list[redis.Redis],
) -> None:
    both, only = "web-1:4242:0123456789ab", "web-2:77:abcdefabcdef"
    add_process(reds[0], both, running=[payload(jid_of(21), queue="alpha")])
    add_process(reds[1], both)
    add_process(reds[1], only, running=[payload(jid_of(22), queue="beta")])
    body = text(client.get("/busy"))
    assert rows(body, "processes") == ["0", "1", "1"]
    assert sorted(rows(body, "running")) == ["0", "1"]
    assert "/cancel?shard=1" in body  # the running job's Cancel goes to its shard
    assert 'data-stat' not in body and ">3</span><span class=\"summary-label\">Busy" in body
    response = post(client, "/busy", {"action": "quiet", "identity": both}, page="/busy")
    assert "Asked 1 process(es) to go quiet" in flash(client, response)
    assert reds[0].lrange(f"{both}-signals", 0, -1) == [b"TSTP"]
    assert reds[1].lrange(f"{both}-signals", 0, -1) == [b"TSTP"]
    assert not reds[1].exists(f"{only}-signals")
    post(client, "/busy", {"action": "stop", "all": "1"}, page="/busy")
    assert reds[1].lrange(f"{only}-signals", 0, -1) == [b"TERM"]


def test_explain_and_cancel_find_the_jobs_shard(
    client: Client, reds: list[redis.Redis],
) -> None:
    seed(reds)
    body = text(client.get(f"/explain?jid={jid_of(6)}"))
    assert 'data-shard="1"' in body and "shard 1" in body
    assert "/queues/beta?shard=1" in body
    assert "not found" in text(client.get(f"/explain?jid={jid_of(99)}")).lower()
    response = post(client, "/cancel", {"jid": jid_of(6), "next": "/queues"})
    assert flash(client, response).startswith("shard 1: ")
    assert [json.loads(j)["jid"] for j in reds[1].lrange("queue:beta", 0, -1)] == [jid_of(5)]
    assert reds[0].llen("queue:alpha") == 3
    response = post(client, "/cancel?shard=0", {"jid": jid_of(1)})
    assert response.status_code == 303
    assert reds[0].llen("queue:alpha") == 2


def test_a_shard_that_is_down_shows_as_down_and_the_other_still_shows(
    client: Client, servers: tuple[RedisServer, RedisServer], reds: list[redis.Redis],
) -> None:
    seed(reds)
    add_process(reds[0])
    servers[1].stop()
    started = time.monotonic()
    body = text(client.get("/"))
    assert 'id="shards-down"' in body and "Shard 1 (" in body
    assert body.count('badge badge-dead"') == 1
    assert 'data-stat="enqueued">4<' in body  # shard 0's alpha (3) and default (1)
    assert json.loads(client.get("/stats.json").get_data())["retry_size"] == 2
    queues = text(client.get("/queues"))
    assert rows(queues, "queues") == ["0", "0"] and "beta" not in queues
    assert rows(text(client.get("/retries")), "jobs") == ["0", "0"]
    assert rows(text(client.get("/busy")), "processes") == ["0"]
    assert 'data-shard="0"' not in text(client.get(f"/explain?jid={jid_of(6)}"))
    assert jid_of(1) in text(client.get(f"/explain?jid={jid_of(1)}"))
    # The live shard's actions still work.
    post(client, "/queues/alpha", {"action": "pause"})
    assert reds[0].smembers("paused") == {b"alpha"}
    # The down shard's own pages answer 503, not a hang or a crash.
    assert client.get("/queues/beta").status_code == 503
    assert time.monotonic() - started < 60


def test_per_shard_pages_pick_their_shard(client: Client, reds: list[redis.Redis]) -> None:
    body = text(client.get("/periodic?shard=1"))
    assert "shard 1:" in body  # the context bar names the shard read
    assert 'class="tag tag-link current"' in body
    assert client.get("/keys?shard=2").status_code == 400
    assert client.get("/metrics?shard=1").status_code == 200


def test_rfetch_web_serves_the_merged_view_of_rfetch_shards(
    servers: tuple[RedisServer, RedisServer], reds: list[redis.Redis], tmp_path: Path,
) -> None:
    seed(reds)
    urls = " ".join(s.url for s in servers)
    web = WebProcess(servers[0].url, log_dir=tmp_path,
                     env={"RFETCH_SHARDS": urls, "RFETCH_SHARD_MAP": "alpha=0,beta=1"})
    try:
        web.wait_ready()
        assert "for 2 shards" in web.log()
        with urllib.request.urlopen(web.url + "/stats.json", timeout=10) as answer:
            assert json.loads(answer.read())["enqueued"] == 8
        with urllib.request.urlopen(web.url + "/queues", timeout=10) as answer:
            assert rows(answer.read().decode(), "queues") == ["0", "1", "0", "1"]
    finally:
        web.stop()
