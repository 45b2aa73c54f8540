"""A dead iterable job's page shows its saved cursor and recorded steps, with "Retry from
here" (the plain retry: the state is kept, the job resumes from it) and "Retry from start"
(the state is forgotten first)."""

from __future__ import annotations

import redis
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.web.formatting import entry_key
from tests.support.seed import jid_of
from tests.support.web import failed, post, text


def test_a_dead_iterable_job_shows_its_cursor_and_retries_from_here_or_start(
    client: Client, api: Api, r: redis.Redis
) -> None:
    for n in (1, 2):
        r.zadd("dead", {failed(jid_of(n)): 1000.5 + n})
        r.hset(f"it-{jid_of(n)}", mapping={"ex": "3", "c": "4711", "rt": "12.5", "n": "4712"})
        r.hset(f"rfetch:steps:{jid_of(n)}", "charge", '{"id":"ch_1"}')
    here, start = api.dead.page(reverse=False).jobs
    page = f"/dead/{entry_key(here)}"
    body = text(client.get(page))
    assert "resumes after cursor 4711, 3 execution(s)" in body and "4712 item(s) done" in body
    assert "1 step result(s) recorded (not run again): charge" in body
    assert "Retry from here" in body and "Retry from start" in body

    post(client, page, {"action": "retry"}, page=page)
    assert r.hget(f"it-{jid_of(1)}", "c") == b"4711"  # kept: the retry resumes from it
    page = f"/dead/{entry_key(start)}"
    post(client, page, {"action": "retry_from_start"}, page=page)
    assert not r.exists(f"it-{jid_of(2)}") and not r.exists(f"rfetch:steps:{jid_of(2)}")
    queued = [job for job in r.lrange("queue:default", 0, -1)]
    assert len(queued) == 2 and r.zcard("dead") == 0


def test_a_plain_dead_job_has_no_durable_lines(client: Client, api: Api, r: redis.Redis) -> None:
    r.zadd("dead", {failed(jid_of(3)): 1000.5})
    (record,) = api.dead.page(reverse=False).jobs
    body = text(client.get(f"/dead/{entry_key(record)}"))
    assert "Retry from start" not in body and "Saved cursor" not in body
