"""Recorded results and job dependencies, step by step on a real redis-server: the record is
written with the acknowledgement or the death (``complete.lua``), ``rfetch.result`` wakes on
it, and waiting jobs are released, buried or cancelled by their dependency's end."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import rfetch
from rfetch.api import Api
from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError, JobDied, ResultNotSerializable, ResultTimeout, UnknownResult
from rfetch.jobs.job import RetryDecision
from tests.support.gate_worker import Worker, running
from tests.support.redis_server import RedisServer

RUNS: list[tuple[str, list[Any]]] = []
FAILS: dict[str, int] = {}


class Add(rfetch.Job):
    queue = "q"
    store_result = 600

    def perform(self, a: int, b: int) -> int:
        RUNS.append(("Add", [a, b]))
        return a + b


class Flaky(rfetch.Job):
    """Fails while FAILS[name] > 0 (counting down), then returns its name."""

    queue = "q"
    retry = 3

    def perform(self, name: str) -> str:
        RUNS.append(("Flaky", [name]))
        if FAILS.get(name, 0) > 0:
            FAILS[name] -= 1
            raise ValueError(f"flaky {name}")
        return name

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> RetryDecision:
        return 0.0


class Odd(rfetch.Job):
    queue = "q"
    store_result = 60
    retry = 0

    def perform(self) -> object:
        return {"when": object()}


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RUNS.clear()
    FAILS.clear()
    yield


@pytest.fixture
def cfg(redis_server: RedisServer, r: redis.Redis) -> Config:
    return Config(
        redis_url=redis_server.url, queues=[QueueSpec("q")], block_timeout=0.2, network_timeout=2.0
    )


@pytest.fixture
def worker(cfg: Config) -> Iterator[Worker]:
    with running(cfg, [Add, Flaky, Odd]) as w:
        yield w


def retry_now(w: Worker) -> None:
    """Move every retry entry to its queue now (the poller's job, without waiting)."""
    for raw in w.redis.zrange(w.keys.retry, 0, -1):
        w.redis.zadd(w.keys.retry, {raw: 0})
    w.poller.enqueue_due()


def test_result_is_recorded_with_the_acknowledgement(worker: Worker, r: redis.Redis) -> None:
    jid = Add.set(client=worker.client).perform_async(2, 3)
    assert jid is not None
    assert r.exists(f"rfetch:result:{jid}") == 0
    worker.work_one()
    assert worker.private_lengths() == 0
    record = r.hgetall(f"rfetch:result:{jid}")
    assert record[b"status"] == b"succeeded" and json.loads(record[b"result"]) == 5
    assert 0 < r.ttl(f"rfetch:result:{jid}") <= 600
    assert rfetch.result(jid, timeout=0, client=worker.client) == 5
    assert int(r.get("rfetch:results-stored") or 0) == 1


def test_plain_jobs_write_no_record(worker: Worker, r: redis.Redis) -> None:
    jid = Flaky.set(client=worker.client).perform_async("x")
    worker.work_one()
    assert r.keys("rfetch:result*") == []
    assert jid is not None


def test_result_waits_for_the_job_without_polling(worker: Worker, r: redis.Redis) -> None:
    jid = Add.set(client=worker.client).perform_async(20, 22)
    assert jid is not None
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(rfetch.result(jid, 120, worker.client)))
    waiter.start()
    time.sleep(0.3)
    assert got == []
    started = time.monotonic()
    worker.work_one()
    waiter.join(120)
    assert got == [42]
    assert time.monotonic() - started < 60  # woken by the result, not at its 120 s timeout


def test_a_non_json_result_fails_the_job_with_a_clear_error(worker: Worker, r: redis.Redis) -> None:
    jid = Odd.set(client=worker.client).perform_async()
    assert jid is not None
    worker.work_one()
    with pytest.raises(JobDied) as died:
        rfetch.result(jid, timeout=0, client=worker.client)
    assert died.value.error_class == "rfetch.errors.ResultNotSerializable"
    assert "result['when'] is" in died.value.error_message
    [dead] = r.zrange("dead", 0, -1)
    assert json.loads(dead)["jid"] == jid
    assert ResultNotSerializable.__name__ in died.value.error_class


def test_death_writes_a_dead_record(worker: Worker, r: redis.Redis) -> None:
    FAILS["d"] = 99
    jid = Flaky.set(client=worker.client, store_result=60, retry=0).perform_async("d")
    assert jid is not None
    worker.work_one()
    with pytest.raises(JobDied, match="ValueError: flaky d") as died:
        rfetch.result(jid, timeout=0, client=worker.client)
    assert died.value.status == "dead"
    assert r.zcard("dead") == 1


def test_timeout_and_unknown_jid_are_clear_errors(worker: Worker) -> None:
    jid = Add.set(client=worker.client).perform_async(1, 1)
    assert jid is not None
    with pytest.raises(ResultTimeout, match="waiting in queue q") as waited:
        rfetch.result(jid, timeout=0.3, client=worker.client)
    assert not isinstance(waited.value, UnknownResult)
    with pytest.raises(UnknownResult, match="nowhere"):
        rfetch.result("0" * 24, timeout=0.2, client=worker.client)


def test_aresult_reads_the_record(worker: Worker) -> None:
    from tests.support.aio import run_async

    jid = Add.set(client=worker.client).perform_async(5, 6)
    assert jid is not None
    worker.work_one()
    assert run_async(rfetch.aresult(jid, timeout=1, client=worker.client)) == 11


def test_chain_runs_c_once_after_b_succeeded(worker: Worker, r: redis.Redis) -> None:
    FAILS["B"] = 2
    chained = rfetch.chain(Flaky.s("A"), Flaky.s("B"), Flaky.s("C"), client=worker.client)
    _a, b, c = chained.jids
    assert r.llen("queue:q") == 1  # only A is in a queue; B and C wait outside
    assert json.loads(r.hget("rfetch:waiting", c))["after"] == b
    explained = Api(worker.config, redis=worker.redis).explain(c)
    assert f"waits for job {b}" in explained.summary
    worker.drain()  # A runs, B is released and fails once
    for _ in range(3):
        retry_now(worker)
        worker.drain()
    assert [args for cls, args in RUNS] == [["A"], ["B"], ["B"], ["B"], ["C"]]
    assert r.hlen("rfetch:waiting") == 0
    assert rfetch.result(b, 0, worker.client) == "B"


def test_dependency_death_marks_the_waiting_job(worker: Worker, r: redis.Redis) -> None:
    FAILS["B"] = 99
    chained = rfetch.chain(
        Flaky.s("B").set(retry=0), Flaky.s("C"), Flaky.s("D").set(on_dependency_death="cancel"),
        client=worker.client,
    )
    b, c, _d = chained.jids
    worker.drain()
    assert [args for _, args in RUNS] == [["B"]]
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert set(dead) == {b, c}
    assert dead[c]["error_class"] == "rfetch.DependencyFailed"
    assert f"dependency {b} died (ValueError: flaky B)" in dead[c]["error_message"]
    assert int(r.get("rfetch:deps-cancelled") or 0) == 1  # D: its dependency C never ran
    assert r.hlen("rfetch:waiting") == 0
    with pytest.raises(JobDied, match="DependencyFailed"):
        rfetch.result(c, 0, worker.client)
    explained = Api(worker.config, redis=worker.redis).explain(c)
    assert "DependencyFailed" in explained.summary


def test_after_a_finished_job_runs_at_once_or_is_marked(worker: Worker, r: redis.Redis) -> None:
    done = Add.set(client=worker.client).perform_async(1, 2)
    assert done is not None
    worker.work_one()
    jid = Flaky.set(client=worker.client, after=done).perform_async("next")
    assert r.llen("queue:q") == 1 and r.hlen("rfetch:waiting") == 0
    worker.drain()
    assert RUNS[-1] == ("Flaky", ["next"])
    FAILS["x"] = 99
    died = Flaky.set(client=worker.client, store_result=60, retry=0).perform_async("x")
    worker.work_one()
    assert died is not None
    cancelled = Flaky.set(client=worker.client, after=died, on_dependency_death="cancel")
    assert cancelled.perform_async("never") is not None
    anyway = Flaky.set(client=worker.client, after=died, after_outcome="complete")
    assert anyway.perform_async("anyway") is not None
    worker.drain()
    assert RUNS[-1] == ("Flaky", ["anyway"]) and ("Flaky", ["never"]) not in RUNS
    assert jid is not None


def test_bad_workflow_options_are_refused(worker: Worker) -> None:
    with pytest.raises(ConfigError, match="after must be a jid or a bid"):
        Flaky.set(client=worker.client, after="nope").perform_async("x")
    with pytest.raises(ConfigError, match="perform_at"):
        Flaky.set(client=worker.client, after="a" * 24).perform_in(5, "x")
    with pytest.raises(ConfigError, match="store_result"):
        Flaky.set(client=worker.client, store_result=0).perform_async("x")
    with pytest.raises(ConfigError, match="ordering-key gate"):
        Flaky.set(client=worker.client, after="a" * 24, key="k").perform_async("x")
    with pytest.raises(ConfigError, match="at least two"):
        rfetch.chain(Flaky.s("x"), client=worker.client)


def test_web_explain_shows_the_result_and_what_a_job_waits_for(
    worker: Worker, r: redis.Redis
) -> None:
    from werkzeug.test import Client as WebClient

    from rfetch.web import WebApp

    done = Add.set(client=worker.client).perform_async(19, 23)
    assert done is not None
    waits = Flaky.set(client=worker.client, after="b" * 24).perform_async("later")
    worker.work_one()
    web = WebClient(WebApp(Api(worker.config, redis=worker.redis)))
    html = web.get(f"/explain?jid={done}").get_data(as_text=True)
    assert 'id="result"' in html and "Recorded outcome" in html and ">42<" in html.replace(
        "\n", "")
    html = web.get(f"/explain?jid={waits}").get_data(as_text=True)
    assert f"waits for job {'b' * 24} to succeed" in html
    assert "no outcome recorded yet" in html


def test_cancelling_a_waiting_job_settles_the_jobs_behind_it(
    worker: Worker, r: redis.Redis
) -> None:
    chained = rfetch.chain(Flaky.s("A"), Flaky.s("B"), Flaky.s("C"), client=worker.client)
    _a, b, c = chained.jids
    api = Api(worker.config, redis=worker.redis)
    answer = api.cancel(b)
    assert answer.state == "deleted", answer.text
    assert "(1 job(s) waiting on it settled too)" in answer.text
    assert r.hlen("rfetch:waiting") == 0
    [dead] = [json.loads(raw) for raw in r.zrange("dead", 0, -1)]
    assert dead["jid"] == c and dead["error_class"] == "rfetch.DependencyFailed"
    assert f"dependency {b} was cancelled" in dead["error_message"]
    with pytest.raises(JobDied, match="cancelled"):
        rfetch.result(b, 0, worker.client)
    worker.drain()
    assert [args for _, args in RUNS] == [["A"]]


def test_after_a_batch_waits_for_its_success(worker: Worker, r: redis.Redis) -> None:
    batch = rfetch.Batch("two adds", client=worker.client)
    with batch.jobs():
        Add.set(client=worker.client).perform_async(1, 1)
        Add.set(client=worker.client).perform_async(2, 2)
    after_object = Flaky.set(client=worker.client, after=batch).perform_async("after batch")
    after_bid = Flaky.set(client=worker.client, after=batch.bid).perform_async("after bid")
    assert after_object is not None and after_bid is not None
    assert r.hlen("rfetch:waiting") == 2
    explained = Api(worker.config, redis=worker.redis).explain(after_bid)
    assert f"waits for batch {batch.bid} to succeed" in explained.summary
    worker.work_one()
    assert ("Flaky", ["after bid"]) not in RUNS
    worker.drain()  # the second add: the batch succeeds and releases both
    assert {tuple(a) for c, a in RUNS if c == "Flaky"} == {("after batch",), ("after bid",)}
    assert r.hlen("rfetch:waiting") == 0
    late = Flaky.set(client=worker.client, after=batch).perform_async("late")
    assert late is not None and r.llen("queue:q") == 1  # succeeded already: queued at once


def test_after_a_dead_batch_is_buried_or_cancelled(worker: Worker, r: redis.Redis) -> None:
    FAILS["x"] = 99
    batch = rfetch.Batch("dies", client=worker.client)
    with batch.jobs():
        Flaky.set(client=worker.client, retry=0).perform_async("x")
    buried = Flaky.set(client=worker.client, after=batch).perform_async("buried")
    dropped = Flaky.set(client=worker.client, after=batch, on_dependency_death="cancel")
    assert dropped.perform_async("dropped") is not None
    worker.drain()
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert dead[buried]["error_class"] == "rfetch.DependencyFailed"
    assert int(r.get("rfetch:deps-cancelled") or 0) == 1
    assert r.hlen("rfetch:waiting") == 0
    assert [a for _, a in RUNS] == [["x"]]


def test_cancelling_a_job_waiting_on_a_batch(worker: Worker, r: redis.Redis) -> None:
    batch = rfetch.Batch("waits", client=worker.client)
    with batch.jobs():
        Add.set(client=worker.client).perform_async(1, 1)
    jid = Flaky.set(client=worker.client, after=batch).perform_async("never")
    assert jid is not None
    answer = Api(worker.config, redis=worker.redis).cancel(jid)
    assert answer.state == "deleted" and f"waiting on batch {batch.bid}" in answer.text
    assert r.hlen("rfetch:waiting") == 0 and r.llen(f"b-{batch.bid}-waiting-success") == 0
    worker.drain()
    assert ("Flaky", ["never"]) not in RUNS


def test_cli_result_and_waiting(worker: Worker, r: redis.Redis) -> None:
    from click.testing import CliRunner

    from rfetch.cli import main

    def run(*args: str) -> Any:
        return CliRunner().invoke(main, [*args, "--redis-url", worker.config.redis_url],
                                  catch_exceptions=False)

    done = Add.set(client=worker.client).perform_async(40, 2)
    assert done is not None
    waiting = Flaky.set(client=worker.client, after=done).perform_async("w")
    listed = run("waiting")
    assert listed.exit_code == 0 and waiting in listed.stdout and done in listed.stdout
    explained = run("explain", waiting)
    assert explained.exit_code == 0 and f"waits for job {done} to succeed" in explained.stdout
    none_yet = run("result", done)
    assert none_yet.exit_code == 1 and "no result for jid" in none_yet.stdout
    worker.work_one()
    shown = run("result", done, "--wait", "1")
    assert shown.exit_code == 0 and shown.stdout.strip() == "42"
    assert json.loads(run("result", done, "--json").stdout)["result"] == 42
    assert "0 waiting job(s)" in run("waiting").stdout
    FAILS["z"] = 9
    died = Flaky.set(client=worker.client, store_result=60, retry=0).perform_async("z")
    assert died is not None
    worker.drain()
    dead = run("result", died)
    assert dead.exit_code == 1 and "dead: ValueError: flaky z" in dead.stdout


def test_every_waiter_of_one_jid_wakes(worker: Worker) -> None:
    jid = Add.set(client=worker.client).perform_async(3, 4)
    assert jid is not None
    got: list[Any] = []
    waiters = [
        threading.Thread(target=lambda: got.append(rfetch.result(jid, 10, worker.client)))
        for _ in range(3)
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.3)
    worker.work_one()
    for waiter in waiters:
        waiter.join(5)
    assert got == [7, 7, 7]


@rfetch.job(queue="q", store_result=60, name="wf.double")
def double(n: int) -> int:
    return 2 * n


def test_function_jobs_record_their_return_value(cfg: Config) -> None:
    with running(cfg, [double.job_class]) as w:
        jid = double.set(client=w.client).perform_async(21)
        assert jid is not None
        w.work_one()
        assert rfetch.result(jid, 0, w.client) == 42


def test_cancelling_a_queued_dependency_settles_its_waiting_jobs(
    worker: Worker, r: redis.Redis
) -> None:
    chained = rfetch.chain(Flaky.s("A"), Flaky.s("B"), client=worker.client)
    a, b = chained.jids
    answer = Api(worker.config, redis=worker.redis).cancel(a, reason="not today")
    assert answer.state == "deleted" and "(1 job(s) waiting on it settled too)" in answer.text
    with pytest.raises(JobDied, match=r"cancelled: rfetch\.JobCancelled: cancelled: not today"):
        rfetch.result(a, 0, worker.client)
    [dead] = [json.loads(raw) for raw in r.zrange("dead", 0, -1)]
    assert dead["jid"] == b and f"dependency {a} was cancelled" in dead["error_message"]
    assert r.hlen("rfetch:waiting") == 0 and r.llen("queue:q") == 0


def test_a_batch_death_settles_the_jobs_behind_its_waiting_jobs(
    worker: Worker, r: redis.Redis
) -> None:
    FAILS["x"] = 99
    batch = rfetch.Batch("dies", client=worker.client)
    with batch.jobs():
        Flaky.set(client=worker.client, retry=0).perform_async("x")
    b = Flaky.set(client=worker.client, after=batch, store_result=60).perform_async("b")
    c = Flaky.set(client=worker.client, after=b).perform_async("c")
    assert b is not None and c is not None
    worker.drain()
    with pytest.raises(JobDied, match="DependencyFailed: batch") as died:
        rfetch.result(b, 0, worker.client)
    assert died.value.status == "dead"
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert dead[c]["error_class"] == "rfetch.DependencyFailed"
    assert f"dependency {b} was dead" in dead[c]["error_message"]
    assert r.hlen("rfetch:waiting") == 0
    assert [a for _, a in RUNS] == [["x"]]


def test_aresult_waits_for_the_job(worker: Worker) -> None:
    from tests.support.aio import run_async

    jid = Add.set(client=worker.client).perform_async(8, 9)
    assert jid is not None
    got: list[Any] = []
    waiter = threading.Thread(
        target=lambda: got.append(run_async(rfetch.aresult(jid, 10, worker.client)))
    )
    waiter.start()
    time.sleep(0.3)
    assert got == []
    worker.work_one()
    waiter.join(5)
    assert got == [17]


def test_a_capped_store_result_job_gives_its_slot_back_with_its_record(
    worker: Worker, r: redis.Redis
) -> None:
    capped = Add.set(client=worker.client, concurrency_key="acct-1", concurrency_limit=1)
    jids = [capped.perform_async(i, i) for i in range(3)]
    deadline = time.monotonic() + 10
    while worker.drain() == 0 or any(r.exists(f"rfetch:result:{j}") == 0 for j in jids):
        assert time.monotonic() < deadline, "the capped jobs did not all run"
        time.sleep(0.05)
    assert [rfetch.result(j, 0, worker.client) for j in jids if j] == [0, 2, 4]
    assert r.hlen("rfetch:cap-held:q") == 0 and r.hlen("rfetch:cap-slots:q") == 0
    with pytest.raises(ConfigError, match="fetch cap"):
        capped.set(after=jids[0]).perform_async(1, 1)


def test_an_expired_store_result_job_records_its_end_and_settles_its_waiters(
    worker: Worker, r: redis.Redis
) -> None:
    jid = Add.set(client=worker.client, expires_in=0.05).perform_async(1, 1)
    assert jid is not None
    waiter = Flaky.set(client=worker.client, after=jid).perform_async("after expiry")
    time.sleep(0.2)
    worker.drain()
    with pytest.raises(JobDied, match=r"rfetch\.JobExpired: expired"):
        rfetch.result(jid, 0, worker.client)
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert dead[waiter]["error_class"] == "rfetch.DependencyFailed"
    assert RUNS == [] and r.hlen("rfetch:waiting") == 0


def test_a_job_pushed_after_a_dead_batch_is_buried_or_dropped_at_once(
    worker: Worker, r: redis.Redis
) -> None:
    from rfetch.workflow.depend import push_dependents

    FAILS["x"] = 99
    batch = rfetch.Batch("died before", client=worker.client)
    with batch.jobs():
        Flaky.set(client=worker.client, retry=0).perform_async("x")
    worker.drain()
    assert batch.bid is not None
    pushed = push_dependents(worker.client, [
        ("Flaky", ["buried"], {"queue": "q", "after": batch.bid}),
        ("Flaky", ["dropped"], {"queue": "q", "after": batch.bid, "on_dependency_death": "cancel"}),
        ("Flaky", ["free"], {"queue": "q"}),
    ])
    assert [p.state for p in pushed] == ["dead", "cancelled", "queued"]
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert dead[pushed[0].jid]["error_class"] == "rfetch.DependencyFailed"
    assert pushed[1].jid not in dead and int(r.get("rfetch:deps-cancelled") or 0) == 1
    assert r.hlen("rfetch:waiting") == 0 and r.llen("queue:q") == 1


def test_a_job_whose_dependency_is_dead_at_its_push_records_its_end_and_settles_its_waiters(
    worker: Worker, r: redis.Redis
) -> None:
    FAILS["x"] = 99
    died = Flaky.set(client=worker.client, store_result=60, retry=0).perform_async("x")
    worker.work_one()
    assert died is not None
    later = "c" * 24  # pushed first, waiting on a jid not pushed yet
    behind = Flaky.set(client=worker.client, after=later).perform_async("behind")
    assert behind is not None and r.hexists("rfetch:waiting", behind)
    pushed = Flaky.set(client=worker.client, jid=later, after=died, store_result=60)
    assert pushed.perform_async("never") == later
    with pytest.raises(JobDied, match=f"DependencyFailed: dependency {died} died") as dead_end:
        rfetch.result(later, 0, worker.client)
    assert dead_end.value.status == "dead"
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert dead[later]["error_class"] == "rfetch.DependencyFailed"
    assert dead[behind]["error_class"] == "rfetch.DependencyFailed"
    assert f"dependency {later} was dead" in dead[behind]["error_message"]
    assert r.hlen("rfetch:waiting") == 0
    worker.drain()
    assert [a for _, a in RUNS] == [["x"]]


def test_cancelling_a_waiting_job_into_the_dead_set_records_it_and_settles_the_jobs_behind_it(
    worker: Worker, r: redis.Redis
) -> None:
    chained = rfetch.chain(Flaky.s("A"), Flaky.s("B"), Flaky.s("C"), client=worker.client)
    _a, b, c = chained.jids
    answer = Api(worker.config, redis=worker.redis).cancel(b, dead=True, reason="operator")
    assert answer.state == "deleted" and "moved to the dead set" in answer.text
    assert "(1 job(s) waiting on it settled too)" in answer.text
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert dead[b]["error_class"] == "rfetch.JobCancelled"
    assert dead[b]["error_message"] == "cancelled while waiting: operator"
    assert dead[c]["error_class"] == "rfetch.DependencyFailed"
    assert f"dependency {b} was cancelled while waiting: operator" in dead[c]["error_message"]
    with pytest.raises(JobDied, match="JobCancelled") as dead_end:
        rfetch.result(b, 0, worker.client)
    assert dead_end.value.status == "dead"
    assert r.hlen("rfetch:waiting") == 0 and int(r.get("rfetch:deps-cancelled") or 0) == 0
    worker.drain()
    assert [a for _, a in RUNS] == [["A"]]
