"""The "Keys & tenants" page (ordering keys, fair tenants): held and blocked ordering keys with the
blocking job, unblocking through the retry set's actions, tenants and their weight form,
bounds, CSRF and read-only mode. Jobs are pushed and failed by a real worker's parts."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable

import pytest
import redis
from markupsafe import escape
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.config import Config
from rfetch.web import WebApp
from tests.support.gate_worker import FAIL, Step, Worker
from tests.support.web import XSS, flash, post, text, token_of

pytestmark = pytest.mark.usefixtures("clear_runs")


@pytest.fixture
def config(cfg: Config) -> Config:
    """The web app's settings are the in-process worker's (``cfg``, queue ``q``)."""
    return cfg


def push(w: Worker, *args: object, **opts: object) -> str:
    jid = Step.set(client=w.client, **opts).perform_async(*args)
    assert jid is not None
    return jid


def block(w: Worker, key: str, arg: object = "boom") -> tuple[str, str]:
    """A key whose holder failed (now in the retry set) and one job waiting behind it."""
    FAIL.add(arg)
    holder = push(w, arg, key=key)
    behind = push(w, "next", key=key)
    w.work_one()
    FAIL.discard(arg)
    return holder, behind


def holder(r: redis.Redis, key: str) -> str | None:
    value = r.hget("rfetch:key-holders:q", key)
    return value.decode() if value is not None else None


def buttons(page: str) -> dict[str, str]:
    """The unblock buttons of the blocked-keys table: action -> ``single`` value."""
    found = re.findall(r'name="single" value="(\w+):([^"]+)"', page)
    return {action: f"{action}:{html.unescape(key)}" for action, key in found}


def section(page: str, table_id: str) -> str:
    start = page.index(f'id="{table_id}"')
    return page[start: page.index("</table>", start)]


def test_page_lists_held_and_blocked_keys_escaped(client: Client, worker: Worker) -> None:
    blocking, _ = block(worker, XSS, arg=XSS)
    queued = push(worker, 1, key="post:1")
    push(worker, 2, key="post:1")
    response = client.get("/keys")
    assert response.status_code == 200
    page = text(response)
    assert XSS not in page  # key, args and error message are all escaped
    assert 'class="active" aria-current="page">Keys &amp; tenants</a>' in page
    blocked = section(page, "blocked")
    assert blocked.count('<tr class="row-blocked"') == 1
    assert f'href="/explain?jid={blocking}"' in blocked
    assert str(escape(XSS)) in blocked  # the key
    assert "RuntimeError" in blocked and "failing &lt;script&gt;" in blocked  # its error
    keys = section(page, "keys")
    assert f'href="/explain?jid={queued}"' in keys and "in the queue" in keys
    assert f'href="/explain?jid={blocking}"' in keys and "retry set: blocked" in keys
    rows = re.findall(r'<tr data-key="([^"]+)"( class="row-blocked")?>', keys)
    assert {html.unescape(k): bool(b) for k, b in rows} == {"post:1": False, XSS: True}
    assert re.search(r'data-key="post:1">.*?<td class="num">1</td>', keys, re.S)
    assert "Showing 2 of 2 held key(s)" in page


def test_retry_now_unblocks_through_the_retry_set_action(
    client: Client, worker: Worker, r: redis.Redis, api: Api
) -> None:
    blocking, _ = block(worker, "post:7")
    page = text(client.get("/keys"))
    single = buttons(page)["retry"]
    response = post(client, "/retries", {"single": single, "next": "/keys"}, page="/keys")
    assert response.headers["Location"] == "/keys"
    assert flash(client, response) == "Retried: 1 job(s)."
    assert r.zcard("retry") == 0
    assert [json.loads(v)["jid"] for v in r.lrange("queue:q", 0, -1)] == [blocking]
    assert holder(r, "post:7") == blocking  # out again, still holding its key
    assert api.blocked_keys() == []
    assert "No ordering key is blocked" in text(client.get("/keys"))


def test_delete_releases_the_key_to_the_next_job(
    client: Client, worker: Worker, r: redis.Redis
) -> None:
    blocking, behind = block(worker, "post:8")
    single = buttons(text(client.get("/keys")))["delete"]
    response = post(client, "/retries", {"single": single, "next": "/keys"}, page="/keys")
    assert flash(client, response) == "Deleted: 1 job(s)."
    assert holder(r, "post:8") == behind
    assert [json.loads(v)["jid"] for v in r.lrange("queue:q", 0, -1)] == [behind]
    assert blocking not in text(client.get("/keys"))


def test_tenants_with_backlog_weight_and_ring(client: Client, worker: Worker) -> None:
    for i in range(3):
        push(worker, i, tenant="acme")
    push(worker, 9, tenant=XSS)
    worker.client.redis.hset("rfetch:fair-weights:q", "idle-co", 4)
    page = text(client.get("/keys"))
    assert XSS not in page
    table = page[page.index('data-queue="q"'):]
    rows = re.findall(r'<tr data-tenant="([^"]+)">\s*<td class="mono strong">[^<]*</td>\s*'
                      r'<td class="num">(\d+)</td>\s*<td class="num">(\d+)</td>\s*<td>(.*?)</td>',
                      table, re.S)
    got = {html.unescape(t): (int(b), int(w), "badge" in ring) for t, b, w, ring in rows}
    assert got == {"acme": (3, 1, True), XSS: (1, 1, True), "idle-co": (0, 4, False)}
    assert "Showing 3 of 3 tenant(s) of queue q" in page


def test_weight_form_sets_the_weight(client: Client, worker: Worker, r: redis.Redis) -> None:
    push(worker, 1, tenant="acme")
    response = post(client, "/keys", {"action": "weight", "queue": "q", "tenant": "acme",
                                      "weight": "5", "next": "/keys"}, page="/keys")
    assert response.headers["Location"] == "/keys"
    assert "Tenant acme of queue q now gets 5 job(s) per turn" in flash(client, response)
    assert r.hget("rfetch:fair-weights:q", "acme") == b"5"
    assert 'value="5" aria-label="Weight of acme"' in text(client.get("/keys"))


@pytest.mark.parametrize(
    ("queue", "tenant", "weight", "message"),
    [
        ("q", "acme", "0", "weight must be a whole number from 1 to 1000, got 0"),
        ("q", "acme", "1001", "weight must be a whole number from 1 to 1000"),
        ("q", "acme", "two", "The weight must be a whole number from 1 to 1000."),
        ("q", "a|b", "2", "tenant must be a non-empty string without &#39;|&#39;"),
        ("q", "", "2", "tenant must be a non-empty string"),
        ("", "acme", "2", "Give the queue of the tenant."),
    ],
)
def test_weight_form_refuses_bad_input(client: Client, r: redis.Redis, queue: str,
                                       tenant: str, weight: str, message: str) -> None:
    response = post(client, "/keys", {"action": "weight", "queue": queue, "tenant": tenant,
                                      "weight": weight}, page="/keys")
    assert response.headers["Location"] == "/keys"
    page = text(client.get(response.headers["Location"]))
    assert '<div class="flash flash-error" role="status">' + message in page
    assert not r.exists("rfetch:fair-weights:q") and not r.exists("rfetch:fair-weights:")


def test_unknown_action_is_refused(client: Client) -> None:
    response = post(client, "/keys", {"action": "drop", "queue": "q"}, page="/keys")
    assert response.status_code == 400
    assert "unknown action &#39;drop&#39;" in text(response)


def test_actions_need_the_csrf_token(client: Client, worker: Worker, r: redis.Redis) -> None:
    _, _ = block(worker, "post:9")
    single = buttons(text(client.get("/keys")))["delete"]
    form = {"action": "weight", "queue": "q", "tenant": "acme", "weight": "3"}
    assert client.post("/keys", data=form).status_code == 403
    assert post(client, "/keys", form, token="0" * 43).status_code == 403
    assert client.post("/retries", data={"single": single}).status_code == 403
    assert not r.exists("rfetch:fair-weights:q")
    assert r.zcard("retry") == 1


def test_read_only_shows_no_action_and_refuses_posts(
    make_app: Callable[..., WebApp], worker: Worker, r: redis.Redis
) -> None:
    block(worker, "post:10")
    push(worker, 1, tenant="acme")
    client = Client(make_app(read_only=True))
    page = text(client.get("/keys"))
    assert 'id="blocked"' in page and "post:10" in page
    assert 'data-tenant="acme"' in page
    assert 'name="single"' not in page and 'id="weight-form"' not in page
    assert "<form method=\"post\"" not in page
    token = token_of(client, "/keys")
    form = {"action": "weight", "queue": "q", "tenant": "acme", "weight": "3"}
    assert post(client, "/keys", form, token=token).status_code == 403
    assert not r.exists("rfetch:fair-weights:q")


def test_the_page_is_bounded_and_says_how_much_it_shows(
    client: Client, worker: Worker
) -> None:
    for i in range(30):
        push(worker, i, key=f"k{i:02d}")
        push(worker, i, tenant=f"t{i:02d}")
    page = text(client.get("/keys?limit=25"))
    assert section(page, "keys").count("<tr data-key=") == 25
    assert "Showing 25 of 30 held key(s); choose a queue or a larger page size" in page
    assert page.count("<tr data-tenant=") == 25
    assert "Showing 25 of 30 tenant(s) of queue q" in page
    page = text(client.get("/keys?limit=50&queue=q"))
    assert section(page, "keys").count("<tr data-key=") == 30
    assert "Showing 30 of 30 held key(s)." in page
    page = text(client.get("/keys?queue=other"))
    assert "No ordering key is held in queue other." in page
    assert "No fair queue has tenants in queue other." in page


def test_api_bounds_and_counts(worker: Worker, api: Api) -> None:
    blocking, _ = block(worker, "kb")
    for i in range(5):
        push(worker, i, key=f"k{i}")
        push(worker, i, tenant=f"t{i}")
    assert api.ordering_key_count() == 6 and api.ordering_key_count("q") == 6
    assert api.ordering_key_count("other") == 0
    assert len(api.tenants("q", limit=2)) == 2 and api.tenant_count("q") == 5
    assert [b.holder for b in api.blocked_keys()] == [blocking]
    with pytest.raises(ValueError, match="max_scan must be 1 or more"):
        api.blocked_keys(max_scan=0)
    with pytest.raises(ValueError, match="limit must be 1 or more"):
        api.tenants("q", limit=0)


def test_blocked_keys_are_found_from_the_retry_set(
    worker: Worker, api: Api, r: redis.Redis
) -> None:
    blocking, _ = block(worker, "post:1")
    worker.client.push_bulk("Step", [[i] for i in range(3000)],
                            options_for=lambda a: {"queue": "q", "key": f"k{a[0]}"})
    # A failed job that carries a key it does not hold (a ``skip`` retry or a coalesced
    # follower) blocks nothing; nor does a plain failed job.
    r.zadd("retry", {
        json.dumps({"class": "Step", "args": [], "jid": "f" * 24, "queue": "q",
                    "ordering_key": "post:1", "error_class": "E"}): 1.0,
        json.dumps({"class": "Step", "args": [], "jid": "e" * 24, "queue": "q"}): 2.0,
        "not json": 3.0,
    })
    assert api.ordering_key_count() == 3001
    (info,) = api.blocked_keys()
    assert (info.queue, info.key, info.holder, info.pending) == ("q", "post:1", blocking, 1)
    assert info.job is not None and info.job.error_class == "RuntimeError"
    assert api.blocked_keys(max_scan=3) == []  # the three entries before it
    assert [b.holder for b in api.blocked_keys(max_scan=4)] == [blocking]
    assert api.blocked_keys("other") == []


def test_blocked_rows_are_bounded_by_the_page_size(client: Client, worker: Worker) -> None:
    for i in range(30):
        block(worker, f"b{i:02d}", arg=i)
    page = text(client.get("/keys?limit=25"))
    assert section(page, "blocked").count('<tr class="row-blocked"') == 25
    assert "Showing 25 of 30 blocked key(s), next retry first." in page
