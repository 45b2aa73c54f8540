"""Every action of the web UI: a POST with a CSRF token, checked for its effect on Redis."""

from __future__ import annotations

import json
import time

import redis
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.web.formatting import entry_key
from tests.support.seed import jid_of
from tests.support.web import IDENTITY, add_process, failed, flash, payload, post, text


def queue_jids(r: redis.Redis, name: str = "default") -> list[str]:
    return [json.loads(v)["jid"] for v in r.lrange(f"queue:{name}", 0, -1)]


def set_jids(r: redis.Redis, key: str) -> list[str]:
    return [json.loads(v)["jid"] for v in r.zrange(key, 0, -1)]


# -- processes ---------------------------------------------------------------------------


def test_quiet_and_stop_one_process(client: Client, r: redis.Redis) -> None:
    add_process(r)
    response = post(client, "/busy", {"action": "quiet", "identity": IDENTITY}, page="/busy")
    assert "Asked 1 process(es) to go quiet" in flash(client, response)
    assert r.lrange(f"{IDENTITY}-signals", 0, -1) == [b"TSTP"]
    assert 0 < r.ttl(f"{IDENTITY}-signals") <= 60
    post(client, "/busy", {"action": "stop", "identity": IDENTITY}, page="/busy")
    assert r.lrange(f"{IDENTITY}-signals", 0, -1) == [b"TERM", b"TSTP"]


def test_quiet_all_and_unknown_process(client: Client, r: redis.Redis) -> None:
    add_process(r, "a:1:aaaaaaaaaaaa")
    add_process(r, "b:2:bbbbbbbbbbbb")
    response = post(client, "/busy", {"action": "quiet", "all": "1"}, page="/busy")
    assert "Asked 2 process(es)" in flash(client, response)
    assert r.lrange("a:1:aaaaaaaaaaaa-signals", 0, -1) == [b"TSTP"]
    assert r.lrange("b:2:bbbbbbbbbbbb-signals", 0, -1) == [b"TSTP"]
    response = post(client, "/busy", {"action": "stop", "identity": "gone:9:cccccccccccc"},
                    page="/busy")
    assert "Not found (already gone?): gone:9:cccccccccccc" in flash(client, response)
    assert not r.exists("gone:9:cccccccccccc-signals")
    assert post(client, "/busy", {"action": "explode", "identity": IDENTITY},
                page="/busy").status_code == 400


# -- queues ------------------------------------------------------------------------------


def test_pause_and_unpause_a_queue(client: Client, r: redis.Redis) -> None:
    r.sadd("queues", "mail")
    pubsub = r.pubsub()
    pubsub.subscribe("rfetch:pause")
    response = post(client, "/queues/mail", {"action": "pause", "next": "/queues"})
    assert response.headers["Location"] == "/queues"
    assert "Paused queue mail" in flash(client, response)
    assert r.smembers("paused") == {b"mail"}
    messages = [pubsub.get_message(timeout=1) for _ in range(2)]
    assert any(m and m["data"] == b"pause mail" for m in messages)
    assert "badge-paused" in text(client.get("/queues"))
    post(client, "/queues/mail", {"action": "unpause"})
    assert r.smembers("paused") == set()
    pubsub.close()


def test_clear_a_queue(client: Client, r: redis.Redis) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", *[payload(jid_of(i)) for i in range(5)])
    response = post(client, "/queues/default", {"action": "clear"})
    assert response.headers["Location"] == "/queues"
    assert "Cleared queue default: 5 job(s) deleted." in flash(client, response)
    assert not r.exists("queue:default")


def test_delete_queue_jobs_one_selection_and_matching(client: Client, r: redis.Redis) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", *[
        payload(jid_of(i), "app.Keep" if i < 6 else "app.Drop", [f"user-{i}"])
        for i in range(10)
    ])
    response = post(client, "/queues/default", {"single": jid_of(0)}, page="/queues/default")
    assert "Deleted: 1 job(s)." in flash(client, response)
    assert jid_of(0) not in queue_jids(r)
    post(client, "/queues/default", {"action": "delete", "jid": [jid_of(1), jid_of(2)]},
         page="/queues/default")
    assert len(queue_jids(r)) == 7
    response = post(client, "/queues/default", {"action": "delete_matching", "class": "Drop"},
                    page="/queues/default")
    assert "Deleted: 4 job(s)." in flash(client, response)
    assert sorted(queue_jids(r)) == [jid_of(i) for i in (3, 4, 5)]
    response = post(client, "/queues/default", {"action": "delete_matching", "grep": "user-4"},
                    page="/queues/default")
    assert sorted(queue_jids(r)) == [jid_of(3), jid_of(5)]
    # An empty filter is refused: clearing a queue is its own, explicit action.
    assert post(client, "/queues/default", {"action": "delete_matching"},
                page="/queues/default").status_code == 400
    assert len(queue_jids(r)) == 2


# -- sorted sets -------------------------------------------------------------------------


def keys_of(api: Api, name: str) -> dict[str, str]:
    """jid -> UI key of every entry of a set."""
    return {str(j.jid): entry_key(j) for j in api.job_set(name).page(0, 200).jobs}


def test_retry_one_job_from_the_row(client: Client, api: Api, r: redis.Redis) -> None:
    r.zadd("retry", {failed(jid_of(i), retry_count=3): 1000 + i for i in range(3)})
    key = keys_of(api, "retry")[jid_of(1)]
    response = post(client, "/retries", {"single": f"retry:{key}"}, page="/retries")
    assert "Retried: 1 job(s)." in flash(client, response)
    assert set_jids(r, "retry") == [jid_of(0), jid_of(2)]
    (pushed,) = r.lrange("queue:default", 0, -1)
    job = json.loads(pushed)
    assert job["jid"] == jid_of(1)
    assert job["retry_count"] == 2  # a manual retry does not use up an attempt
    assert abs(job["enqueued_at"] - time.time()) < 5
    assert r.sismember("queues", "default")


def test_set_actions_on_a_selection(client: Client, api: Api, r: redis.Redis) -> None:
    r.zadd("retry", {failed(jid_of(i)): 1000 + i for i in range(8)})
    keys = keys_of(api, "retry")
    post(client, "/retries", {"action": "kill", "key": [keys[jid_of(0)], keys[jid_of(1)]]},
         page="/retries")
    assert set_jids(r, "dead") == [jid_of(0), jid_of(1)]
    post(client, "/retries", {"action": "delete", "key": [keys[jid_of(2)]]}, page="/retries")
    post(client, "/retries", {"action": "add_to_queue", "key": [keys[jid_of(3)]]},
         page="/retries")
    assert json.loads(r.lindex("queue:default", 0))["retry_count"] == 0  # unchanged
    response = post(client, "/retries",
                    {"action": "retry", "key": [keys[jid_of(4)], keys[jid_of(2)]]},
                    page="/retries")
    message = flash(client, response)
    assert "Retried: 1 job(s)." in message and "1 already gone" in message
    assert set_jids(r, "retry") == [jid_of(i) for i in (5, 6, 7)]
    assert sorted(queue_jids(r)) == [jid_of(3), jid_of(4)]
    response = post(client, "/retries", {"action": "retry"}, page="/retries")
    assert "No job selected." in flash(client, response)


def test_set_actions_on_all_matching_a_filter(client: Client, r: redis.Redis) -> None:
    r.zadd("retry", {
        failed(jid_of(i), "app.Mail" if i % 2 else "app.Sms", error=f"code {i}"): 1000 + i
        for i in range(10)
    })
    response = post(client, "/retries", {"action": "retry", "scope": "matching",
                                          "class": "Mail", "grep": ""}, page="/retries")
    assert "Retried: 5 job(s)." in flash(client, response)
    assert set_jids(r, "retry") == [jid_of(i) for i in (0, 2, 4, 6, 8)]
    post(client, "/retries", {"action": "kill", "scope": "matching", "grep": "code 4"},
         page="/retries")
    assert set_jids(r, "dead") == [jid_of(4)]
    response = post(client, "/retries", {"action": "delete", "scope": "matching"},
                    page="/retries")
    assert "Deleted: 4 job(s)." in flash(client, response)
    assert r.zcard("retry") == 0


def test_scheduled_run_now_and_dead_retry(client: Client, api: Api, r: redis.Redis) -> None:
    r.zadd("schedule", {payload(jid_of(1), "app.Report", queue="reports"): time.time() + 999})
    key = keys_of(api, "schedule")[jid_of(1)]
    page = text(client.get("/scheduled"))
    assert "Run now" in page and 'value="retry"' not in page and 'value="retry:' not in page
    assert post(client, "/scheduled", {"single": f"retry:{key}"},
                page="/scheduled").status_code == 400  # not failed: run it, don't retry it
    post(client, "/scheduled", {"single": f"add_to_queue:{key}"}, page="/scheduled")
    assert queue_jids(r, "reports") == [jid_of(1)]
    assert r.zcard("schedule") == 0

    r.zadd("dead", {failed(jid_of(2), retry_count=25): 1, failed(jid_of(3)): 2})
    keys = keys_of(api, "dead")
    post(client, "/dead", {"action": "retry", "key": [keys[jid_of(2)]]}, page="/dead")
    assert json.loads(r.lindex("queue:default", 0))["retry_count"] == 24
    assert post(client, "/dead", {"action": "kill", "key": [keys[jid_of(3)]]},
                page="/dead").status_code == 400  # the dead set has no kill
    post(client, "/dead", {"action": "delete", "key": [keys[jid_of(3)]]}, page="/dead")
    assert r.zcard("dead") == 0


def test_actions_from_the_job_detail_page(client: Client, api: Api, r: redis.Redis) -> None:
    r.zadd("retry", {failed(jid_of(1)): 5, failed(jid_of(2)): 6})
    keys = keys_of(api, "retry")
    response = post(client, f"/retries/{keys[jid_of(1)]}", {"action": "kill"}, page="/retries")
    assert response.headers["Location"] == "/retries"
    assert "Killed" in flash(client, response)
    assert set_jids(r, "dead") == [jid_of(1)]
    response = post(client, f"/retries/{keys[jid_of(1)]}", {"action": "retry"},
                    page="/retries")
    assert "no longer in the set" in flash(client, response)


def test_entries_that_are_not_jobs_can_be_deleted(client: Client, api: Api,
                                                  r: redis.Redis) -> None:
    r.zadd("dead", {b"not json at all": 7, b"[1,2]": 7, failed(jid_of(1)): 7})
    body = text(client.get("/dead"))
    assert "not json at all" in body and "(invalid)" in body
    page = api.dead.page()
    keys = [entry_key(j) for j in page.jobs if not j.valid]
    assert len(set(keys)) == 2  # same score, told apart by their bytes
    response = post(client, "/dead", {"action": "retry", "key": keys}, page="/dead")
    assert "2 skipped" in flash(client, response)
    post(client, "/dead", {"action": "delete", "key": keys}, page="/dead")
    assert set_jids(r, "dead") == [jid_of(1)]


def test_post_redirects_back_to_the_page_with_its_query(client: Client, api: Api,
                                                        r: redis.Redis) -> None:
    r.zadd("retry", {failed(jid_of(i)): i for i in range(3)})
    key = keys_of(api, "retry")[jid_of(0)]
    response = post(client, "/retries", {"single": f"delete:{key}",
                                         "next": "/retries?sort=retry_count&offset=0"},
                    page="/retries")
    assert response.headers["Location"] == "/retries?sort=retry_count&offset=0"
    for evil in ("https://evil.example/", "//evil.example/x", "/\\evil"):
        response = post(client, "/retries", {"action": "retry", "next": evil}, page="/retries")
        assert response.headers["Location"] == "/retries"
