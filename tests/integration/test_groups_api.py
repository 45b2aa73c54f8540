"""rfetch.api for ordering keys and tenants: held and blocked keys with the
blocking job, tenants with backlog and weight, setting a weight, explain lines."""

from __future__ import annotations

import json

import pytest

from rfetch.api import Api
from tests.support.gate_worker import FAIL, Step, Worker
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.usefixtures("clear_runs")


@pytest.fixture
def api(worker: Worker) -> Api:
    return Api(worker.config, redis=worker.redis)


def push(w: Worker, *args: object, **opts: object) -> str:
    jid = Step.set(client=w.client, **opts).perform_async(*args)
    assert jid is not None
    return jid


def test_ordering_keys_show_holder_place_and_pending(worker: Worker, api: Api) -> None:
    queued = push(worker, 0, key="a")
    push(worker, 1, key="a")
    push(worker, 2, key="a")
    FAIL.add(10)
    failing = push(worker, 10, key="b")
    unit = worker.fetch.retrieve_work(10)
    assert len(unit) == 2
    worker.fetch.requeue([u for u in unit if b'"a"' in u.raw])  # a's holder back in queue
    worker.processor.process(next(u for u in unit if b'"b"' in u.raw))  # b fails
    push(worker, 11, key="b")
    keys = {k.key: k for k in api.ordering_keys()}
    assert keys["a"].holder == queued and keys["a"].place == "queued"
    assert keys["a"].pending == 2 and not keys["a"].blocked
    assert keys["b"].holder == failing and keys["b"].place == "retry" and keys["b"].blocked
    assert keys["b"].job is not None and keys["b"].job.jid == failing
    blocked = api.blocked_keys()
    assert [(k.key, k.holder) for k in blocked] == [("b", failing)]
    assert keys["a"].to_dict()["place"] == "queued"
    # Unblock by retrying the blocking job: b's holder goes back to the queue.
    FAIL.clear()
    assert api.retries.retry([failing]).done == 1
    assert api.blocked_keys() == []


def test_running_holder_has_a_lease(worker: Worker, api: Api) -> None:
    push(worker, 0, key="a")
    unit = worker.take()
    (info,) = api.ordering_keys()
    assert info.place == "unknown"  # fetched, no heartbeat yet
    pipe = worker.redis.pipeline(transaction=False)
    worker.fetch.write_leases(pipe, [unit])
    pipe.execute()
    (info,) = api.ordering_keys()
    assert info.place == "running" and info.lease_expires is not None


def test_tenants_with_backlog_weight_and_turn(worker: Worker, api: Api) -> None:
    for _ in range(3):
        push(worker, 0, tenant="acme")
    push(worker, 0, tenant="beta")
    api.set_tenant_weight("q", "idle", 4)
    tenants = {t.tenant: t for t in api.tenants("q")}
    assert (tenants["acme"].backlog, tenants["acme"].turn, tenants["acme"].weight) == (3, 0, 1)
    assert (tenants["beta"].backlog, tenants["beta"].turn) == (1, 1)
    assert tenants["idle"].weight == 4 and not tenants["idle"].in_ring
    api.set_tenant_weight("q", "acme", 2)
    assert {t.tenant: t.weight for t in api.tenants("q")}["acme"] == 2


@pytest.mark.parametrize(("tenant", "weight"), [("t", 0), ("t", 1001), ("t", 1.5), ("a|b", 2)])
def test_bad_tenant_weight_raises(api: Api, tenant: str, weight: object) -> None:
    with pytest.raises(ValueError):
        api.set_tenant_weight("q", tenant, weight)  # type: ignore[arg-type]


def test_explain_says_what_a_keyed_or_tenant_job_waits_for(worker: Worker, api: Api) -> None:
    FAIL.add(0)
    head = push(worker, 0, key="a")
    behind = push(worker, 1, key="a")
    worker.work_one()
    text = api.explain(behind).summary
    assert "waiting behind ordering key 'a'" in text and head in text
    assert "in the retry set" in text
    for _ in range(2):
        push(worker, 5, tenant="acme")
    last = push(worker, 6, tenant="acme")
    assert "waiting in tenant acme's list of queue q at position 3" in api.explain(last).summary


# -- CLI ------------------------------------------------------------------------------------------


def test_cli_keys_and_tenants_tables_and_json(
    worker: Worker, redis_server: RedisServer
) -> None:
    from click.testing import CliRunner

    from rfetch.cli import main

    FAIL.add(0)
    failing = push(worker, 0, key="post:1")
    push(worker, 1, key="post:1")
    worker.work_one()
    push(worker, 2, tenant="acme")
    runner = CliRunner()
    url = ["--redis-url", redis_server.url]
    table = runner.invoke(main, ["keys", *url])
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[0].split() == ["QUEUE", "KEY", "HOLDER", "PLACE", "PENDING"]
    assert table.output.splitlines()[1].split() == ["q", "post:1", failing, "retry", "1"]
    blocked = runner.invoke(main, ["keys", "--blocked", "--json", *url])
    assert json.loads(blocked.output)[0]["holder"] == failing
    tenants = runner.invoke(main, ["tenants", "q", "--weight", "acme", "3", "--json", *url])
    assert tenants.exit_code == 0, tenants.output
    assert json.loads(tenants.output) == [
        {"tenant": "acme", "backlog": 1, "weight": 3, "in_ring": True, "turn": 0}
    ]
    bad = runner.invoke(main, ["tenants", "q", "--weight", "a|b", "3", *url])
    assert bad.exit_code != 0 and "tenant must be" in bad.output
