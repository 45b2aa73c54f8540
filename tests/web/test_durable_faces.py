"""A dead iterable job's page shows its saved cursor and recorded steps, with "Retry from
here" (the plain retry: the state is kept, the job resumes from it) and "Retry from start"
(the state is forgotten first)."""

from __future__ import annotations

import redis
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.web.formatting import entry_key
from tests.support.seed import jid_of
from tests.support.web import add_process, failed, payload, post, text


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


def test_running_iterable_jobs_in_the_metrics(client: Client, r: redis.Redis) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    add_process(r, busy=2, running=[payload(jid_of(5), cls="app.Backfill"),
                                    payload(jid_of(6), cls="app.Plain")])
    r.hset(f"it-{jid_of(5)}", mapping={"ex": "2", "c": "99", "rt": "3.0", "n": "100"})
    found = {
        (s.name, s.labels.get("jid")): s.value
        for family in text_string_to_metric_families(text(client.get("/metrics")))
        for s in family.samples if s.name.startswith("rfetch_iterable")
    }
    assert found == {("rfetch_iterable_done_items", jid_of(5)): 100.0,
                     ("rfetch_iterable_executions", jid_of(5)): 2.0}
