"""The web UI's Cancel buttons: shown on the busy, queue, set and explain pages, and
``POST /cancel`` cancelling through ``api.cancel``."""

from __future__ import annotations

import json
from collections.abc import Callable

import redis
from werkzeug.test import Client

from rfetch.web import WebApp
from tests.support.web import IDENTITY, add_process, failed, flash, payload, post, text

JID = "c" * 24


def test_cancel_buttons_are_on_the_pages_that_list_live_jobs(
    client: Client, r: redis.Redis
) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", payload(JID))
    r.zadd("retry", {failed("d" * 24): 2e9})
    r.zadd("dead", {failed("e" * 24): 1e9})
    add_process(r, running=[payload("f" * 24)])
    button = 'form="cancel-form" name="jid" value="{}"'
    for page, jid in (("/queues/default", JID), ("/retries", "d" * 24), ("/busy", "f" * 24),
                      (f"/explain?jid={JID}", JID)):
        body = text(client.get(page))
        assert button.format(jid) in body, page
        assert 'id="cancel-form"' in body, page
    assert button.format("e" * 24) not in text(client.get("/dead"))


def test_cancel_a_queued_job_from_the_queue_page(client: Client, r: redis.Redis) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", payload(JID))
    response = post(client, "/cancel", {"jid": JID, "next": "/queues/default"},
                    page="/queues/default")
    assert response.headers["Location"].endswith("/queues/default")
    assert flash(client, response) == f"jid {JID}: deleted from queue default"
    assert r.llen("queue:default") == 0
    assert json.loads(r.get(f"cancel:{JID}") or b"{}")["reason"] == "cancelled in the web UI"


def test_cancel_a_running_job_and_an_unknown_one(client: Client, r: redis.Redis) -> None:
    add_process(r, running=[payload(JID)])
    response = post(client, "/cancel", {"jid": JID, "next": "/busy"}, page="/busy")
    assert "running on" in flash(client, response)
    assert r.exists(f"cancel:{JID}")
    response = post(client, "/cancel", {"jid": "0" * 24, "next": "/busy"}, page="/busy")
    assert "not found" in flash(client, response)
    assert post(client, "/cancel", {"jid": " "}, page="/busy").status_code == 400


def test_cancel_a_fetched_job_says_it_will_not_start(client: Client, r: redis.Redis) -> None:
    add_process(r, busy=0)
    r.lpush(f"queue:sq|{IDENTITY}|default", payload(JID))
    response = post(client, "/cancel", {"jid": JID, "next": "/busy"}, page="/busy")
    assert "not started: it will not start" in flash(client, response)
    body = text(client.get(f"/explain?jid={JID}"))
    assert "cancel requested (cancelled in the web UI): it will not start" in body


def test_read_only_ui_has_no_cancel(make_app: Callable[..., WebApp], r: redis.Redis) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", payload(JID))
    add_process(r, IDENTITY, running=[payload("f" * 24)])
    viewer = Client(make_app(read_only=True))
    for page in ("/queues/default", "/busy", f"/explain?jid={JID}"):
        assert "cancel-form" not in text(viewer.get(page)), page
