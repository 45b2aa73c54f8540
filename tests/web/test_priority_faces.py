"""The faces of priorities inside a queue: the API's queue size, pages in run order (priority
set included), find, delete and clear, explain's "priority N"; ``rfetch queues``,
``rfetch explain`` and ``rfetch enqueue --priority``; the web queue and job pages. Jobs
are pushed by a real worker's client on a real redis-server."""

from __future__ import annotations

import html
import json
import re

import pytest
import redis
from click.testing import CliRunner
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.cli import main
from rfetch.config import Config
from tests.support.gate_worker import Step, Worker
from tests.support.redis_server import RedisServer
from tests.support.web import text

pytestmark = pytest.mark.usefixtures("clear_runs")


@pytest.fixture
def config(cfg: Config) -> Config:
    """The web app's settings are the in-process worker's (``cfg``, queue ``q``)."""
    return cfg


def mixed(w: Worker) -> dict[str, str]:
    """Jobs of queue q, by first argument: run order low2, ..., see RUN_ORDER."""
    jids = {}
    for arg, priority in (("low", -4), ("plain1", None), ("high", 6), ("plain2", None),
                          ("low2", -4), ("top", 60)):
        options = {} if priority is None else {"priority": priority}
        jid = Step.set(client=w.client, **options).perform_async(arg)
        assert jid is not None
        jids[arg] = jid
    return jids


RUN_ORDER = ["top", "high", "plain1", "plain2", "low", "low2"]


def test_api_size_pages_and_find_in_run_order(worker: Worker, api: Api) -> None:
    jids = mixed(worker)
    [info] = api.queues()
    assert info.size == 6  # the list's 2 and the priority set's 4
    queue = api.queue("q")
    assert queue.size() == 6
    page = queue.page(0, 10)
    assert [j.args[0] for j in page.jobs] == RUN_ORDER
    assert [j.position for j in page.jobs] == list(range(6))
    assert [j.priority for j in page.jobs] == [60, 6, 0, 0, -4, -4]
    assert page.total == 6
    assert [j.args[0] for j in queue.page(1, 3).jobs] == RUN_ORDER[1:4]
    assert [j.args[0] for j in queue.page(0, 10, newest_first=True).jobs] == RUN_ORDER[::-1]
    assert [j.args[0] for j in queue.page(2, 2, newest_first=True).jobs] == ["plain2", "plain1"]
    assert [r.position for r in queue.find(jids["low"]).records] == [4]
    assert [r.position for r in queue.find(jids["top"]).records] == [0]
    assert [r.position for r in queue.find(jids["plain2"]).records] == [3]
    assert queue.page(0, 10).jobs[0].to_dict()["priority"] == 60
    # what runs is what the page said
    worker.fetch.refresh_fair(force=True)
    fetched = [json.loads(u.raw)["args"][0] for u in worker.fetch.retrieve_work(10)]
    assert fetched == RUN_ORDER


def test_api_delete_and_clear_reach_the_priority_set(
    worker: Worker, api: Api, r: redis.Redis
) -> None:
    jids = mixed(worker)
    queue = api.queue("q")
    result = queue.delete([jids["high"], jids["plain1"]])
    assert (result.done, result.missing) == (2, [])
    assert [j.args[0] for j in queue.page(0, 10).jobs] == ["top", "plain2", "low", "low2"]
    assert queue.clear() == 4
    assert r.exists("queue:q", "rfetch:prio:q") == 0


def test_cancelling_a_waiting_priority_job_takes_it_out_of_the_priority_set(
    worker: Worker, api: Api, r: redis.Redis
) -> None:
    """Cancel meets priority: a queued priority job is deleted from the priority set
    (dropped, or to the dead set as rfetch.JobCancelled), the others keep their order."""
    jids = mixed(worker)
    dropped = api.cancel(jids["high"])
    assert dropped.state == "deleted" and dropped.cancelled
    buried = api.cancel(jids["low"], dead=True)
    assert buried.state == "deleted" and buried.cancelled
    assert [j.args[0] for j in api.queue("q").page(0, 10).jobs] == [
        "top", "plain1", "plain2", "low2"]
    assert r.zcard("rfetch:prio:q") == 2
    [dead] = [json.loads(raw) for raw in r.zrange("dead", 0, -1)]
    assert dead["jid"] == jids["low"] and dead["error_class"] == "rfetch.JobCancelled"
    assert dead["priority"] == -4


def test_deleting_a_keyed_priority_job_releases_its_key(
    worker: Worker, api: Api, r: redis.Redis
) -> None:
    holder = Step.set(client=worker.client, priority=5, key="k").perform_async("first")
    waiting = Step.set(client=worker.client, priority=5, key="k").perform_async("second")
    assert holder and waiting and r.hget("rfetch:key-holders:q", "k") == holder.encode()
    result = api.queue("q").delete([holder])
    assert (result.done, result.missing) == (1, [])
    # the key's next job went out, into the priority set, and holds the key now
    assert r.hget("rfetch:key-holders:q", "k") == waiting.encode()
    assert [j.jid for j in api.queue("q").page(0, 10).jobs] == [waiting]


def test_explain_names_the_priority_and_the_place(worker: Worker, api: Api) -> None:
    jids = mixed(worker)
    answer = api.explain(jids["low"])
    assert answer.state == "queued"
    assert "waiting in queue q at position 5 of 6 (1 runs next), priority -4" in answer.summary


def test_cli_queues_explain_and_enqueue(
    worker: Worker, redis_server: RedisServer, r: redis.Redis
) -> None:
    jids = mixed(worker)
    runner = CliRunner()
    out = runner.invoke(main, ["queues", "--json", "--redis-url", redis_server.url])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)[0]["size"] == 6
    explained = runner.invoke(main, ["explain", jids["high"], "--redis-url", redis_server.url])
    assert "position 2 of 6 (1 runs next), priority 6" in explained.output
    pushed = runner.invoke(main, ["enqueue", "Ext", "[1]", "--external", "-q", "q",
                                  "--priority", "99", "--redis-url", redis_server.url])
    assert pushed.exit_code == 0, pushed.output
    assert api_first(r) == pushed.stdout.strip()
    bad = runner.invoke(main, ["enqueue", "Ext", "[1]", "--external", "-q", "q",
                               "--priority", "101", "--redis-url", redis_server.url])
    assert bad.exit_code == 1
    assert "priority must be from -100 to 100" in bad.output


def api_first(r: redis.Redis) -> str:
    """The jid of the first job of queue q's priority set (lowest score)."""
    [raw] = r.zrange("rfetch:prio:q", 0, 0)
    return str(json.loads(raw)["jid"])


def test_web_queue_and_job_pages_show_the_priority(worker: Worker, client: Client) -> None:
    jids = mixed(worker)
    page = text(client.get("/queues/q"))
    assert page.count("priority 60") == 1 and page.count("priority -4") == 2
    assert page.index(jids["top"]) < page.index(jids["plain1"]) < page.index(jids["low2"])
    later = Step.set(client=worker.client, priority=6).perform_in(3600, "later")
    found = re.search(r'href="(/scheduled/[^"]+)"', text(client.get("/scheduled")))
    assert found and later
    job_page = text(client.get(html.unescape(found.group(1))))
    assert later in job_page
    assert "<dt>Priority</dt><dd>6 (higher runs first)</dd>" in job_page
