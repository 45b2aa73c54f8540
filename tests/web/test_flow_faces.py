"""The faces of fetch caps and expiring jobs: ``api.concurrency_keys``, explain's "waits: N
of N running for K" (API, CLI and web), ``rfetch concurrency``, the ``/limits/concurrency``
page, the Prometheus families, the expired counts on the dashboard and the queues page, and
``rfetch check``'s warning near a queue's max_queue_size. Jobs are pushed and run by a real
worker's parts on a real redis-server."""

from __future__ import annotations

import json
import time

import pytest
import redis
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
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


def full_key(w: Worker) -> tuple[list[str], str]:
    """Key t42 of limit 3 with 3 jobs fetched (running) and 2 waiting; the last one's jid."""
    opts = {"concurrency_key": "t42", "concurrency_limit": 3}
    jids = [Step.set(client=w.client, **opts).perform_async(i) for i in range(5)]
    assert len(w.fetch.retrieve_work(10)) == 3
    return [j for j in jids if j], str(jids[-1])


def test_api_lists_keys_and_explain_says_why_a_job_waits(worker: Worker, api: Api) -> None:
    _, last = full_key(worker)
    [row] = api.concurrency_keys()
    assert (row.queue, row.key, row.running, row.limit, row.waiting, row.full) == (
        "q", "t42", 3, 3, 2, True)
    answer = api.explain(last)
    assert answer.state == "waiting_cap"
    assert answer.summary.startswith(f"jid {last}: waits: 3 of 3 running for t42 (queue q; "
                                     "1 job(s) of the key go before it)")


def test_cli_concurrency_and_explain(worker: Worker, redis_server: RedisServer) -> None:
    _, last = full_key(worker)
    runner = CliRunner()
    out = runner.invoke(main, ["concurrency", "--redis-url", redis_server.url])
    assert out.exit_code == 0, out.output
    assert "t42" in out.output and "RUNNING" in out.output
    as_json = runner.invoke(main, ["concurrency", "--full", "--json", "--redis-url",
                                   redis_server.url])
    assert json.loads(as_json.output)[0]["waiting"] == 2
    explained = runner.invoke(main, ["explain", last, "--redis-url", redis_server.url])
    assert "waits: 3 of 3 running for t42" in explained.output


def test_web_concurrency_page_and_explain_page(worker: Worker, client: Client) -> None:
    _, last = full_key(worker)
    page = text(client.get("/limits/concurrency"))
    assert 'data-key="t42"' in page and "full" in page
    assert "t42" in text(client.get("/limits/concurrency?queue=q"))
    assert "No concurrency key" in text(client.get("/limits/concurrency?queue=other"))
    assert 'href="/limits/concurrency"' in text(client.get("/limits"))  # a tab of Limits
    assert 'class="active" aria-current="page">Concurrency keys' in page
    assert "waits: 3 of 3 running for t42" in text(client.get(f"/explain?jid={last}"))


def test_metrics_and_expired_counts(worker: Worker, client: Client, r: redis.Redis) -> None:
    full_key(worker)
    Step.set(client=worker.client, expires_in=0.01).perform_async("late")
    time.sleep(0.05)
    [unit] = [u for u in worker.fetch.retrieve_work(10)]
    worker.processor.process(unit)
    got = {}
    for family in text_string_to_metric_families(text(client.get("/metrics"))):
        for s in family.samples:
            got[(s.name, tuple(sorted(s.labels.items())))] = s.value
    labels = (("key", "t42"), ("queue", "q"))
    assert got[("rfetch_concurrency_key_running_jobs", labels)] == 3
    assert got[("rfetch_concurrency_key_waiting_jobs", labels)] == 2
    assert got[("rfetch_concurrency_key_limit_jobs", labels)] == 3
    assert got[("rfetch_expired_total", ())] == 1
    assert got[("rfetch_queue_expired_total", (("queue", "q"),))] == 1
    assert 'data-stat="expired">1<' in text(client.get("/"))
    assert "Expired" in text(client.get("/queues"))


def test_check_warns_past_80_percent_of_a_queues_max(
    worker: Worker, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(9):
        Step.set(client=worker.client).perform_async(i)
    monkeypatch.setenv("RFETCH_MAX_QUEUE_SIZE", "q=10")
    out = CliRunner().invoke(main, ["check", "--redis-url", redis_server.url])
    assert out.exit_code == 1
    assert "queue q holds 9 of its max_queue_size 10 (90%" in out.output
    monkeypatch.setenv("RFETCH_MAX_QUEUE_SIZE", "q=100")
    assert CliRunner().invoke(main, ["check", "--redis-url", redis_server.url]).exit_code == 0
