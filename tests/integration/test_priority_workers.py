"""Priorities inside a queue with real worker processes: 1,000 mixed-priority jobs start in
priority order on one thread, push order within a priority; a job a Ruby Sidekiq client
pushes to ``queue:<q>`` still runs (and Sidekiq's API counts it); a TERM pushes a running
priority job back to its priority; a SIGKILLed worker's priority job is recovered into
the priority set; an idle single-queue worker takes a queue's first priority, tenant or
capped job after one blocking fetch. Evidence of runs from the jobs' record file
(``tests/jobs/testjobs.py``)."""

from __future__ import annotations

import json
import random
import signal

import pytest
import redis

from rfetch.api import Api
from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.ruby import needs_ruby, ruby
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker

PRIORITIES = (-100, -7, -1, 0, 0, 0, 1, 5, 42, 100)


def client_of(redis_server: RedisServer, r: redis.Redis) -> Client:
    return Client(Config(redis_url=redis_server.url), r)


def push(client: Client, job: str, args: list[object], priority: int) -> str:
    options: dict[str, object] = {"queue": "default"}
    if priority:
        options["priority"] = priority
    jid = client.push(job, args, options)
    assert jid is not None
    return jid


def test_a_thousand_mixed_jobs_start_in_priority_order_on_one_thread(
    start_worker: StartWorker, redis_server: RedisServer, r: redis.Redis, record: Record
) -> None:
    client = client_of(redis_server, r)
    rng = random.Random(20261127)
    pushed: list[tuple[int, int, str]] = []  # (priority, push index, jid)
    for i in range(1000):
        priority = rng.choice(PRIORITIES)
        pushed.append((priority, i, push(client, "testjobs.Noop", [i], priority)))
    assert Api(Config(redis_url=redis_server.url), redis=r).queue("default").size() == 1000
    worker = start_worker("-c", "1")
    wait_for(lambda: len(record.jids("done")) == 1000, 120, "the 1,000 jobs to run")
    expected = [jid for _, _, jid in sorted(pushed, key=lambda p: (-p[0], p[1]))]
    assert record.done_order() == expected
    assert {pid for _, _, pid in record.events()} == {worker.pid}  # one process, one thread
    worker.signal(signal.SIGTERM)
    assert worker.wait(15) == 0, worker.log()


@pytest.mark.ruby
@needs_ruby
def test_a_ruby_pushed_job_still_runs_between_the_priorities(
    start_worker: StartWorker, redis_server: RedisServer, r: redis.Redis, record: Record
) -> None:
    client = client_of(redis_server, r)
    low = push(client, "testjobs.Noop", ["low"], -3)
    pushed = ruby(
        redis_server.url,
        'jid = Sidekiq::Client.push("class" => "HardJob", "args" => [1, "x"])\n'
        'puts JSON.generate({jid: jid, size: Sidekiq::Queue.new("default").size})',
    )
    high = push(client, "testjobs.Noop", ["high"], 3)
    assert pushed["size"] == 1  # Sidekiq's API counts the list: the Ruby job is there
    assert Api(Config(redis_url=redis_server.url), redis=r).queue("default").size() == 3
    worker = start_worker("-c", "1")
    wait_for(lambda: len(record.jids("done")) == 3, 15, "the three jobs to run")
    assert record.done_order() == [high, pushed["jid"], low]
    worker.signal(signal.SIGTERM)
    assert worker.wait(15) == 0, worker.log()


def test_term_pushes_a_running_priority_job_back_to_its_priority(
    start_worker: StartWorker, redis_server: RedisServer, r: redis.Redis, record: Record
) -> None:
    client = client_of(redis_server, r)
    # Pushed first: a worker idle on a queue sees its very first priority job only at its
    # next look at rfetch:prio-queues (docs/ordering.md); this one looks at start.
    running = push(client, "testjobs.Sleep", [60], 8)
    worker = start_worker("-c", "1", "-t", "1")
    wait_for(lambda: record.jids("start") == [running], 15, "the priority job to start")
    behind = push(client, "testjobs.Noop", ["behind"], 8)
    plain = push(client, "testjobs.Noop", ["plain"], 0)
    worker.signal(signal.SIGTERM)
    assert worker.wait(20) == 0, worker.log()
    assert not list(r.scan_iter("queue:sq|*"))  # nothing left in a private list
    queued = [json.loads(raw) for raw in r.zrange("rfetch:prio:default", 0, -1)]
    # back in the priority set, first of its priority, with its priority
    assert [(j["jid"], j["priority"]) for j in queued] == [(running, 8), (behind, 8)]
    assert [json.loads(raw)["jid"] for raw in r.lrange("queue:default", 0, -1)] == [plain]


@pytest.mark.slow  # a real worker SIGKILLed, its job recovered by the next one
def test_a_sigkilled_workers_priority_job_is_recovered_to_its_priority(
    start_worker: StartWorker, redis_server: RedisServer, r: redis.Redis, record: Record
) -> None:
    client = client_of(redis_server, r)
    held = push(client, "testjobs.Sleep", [60], 3)
    dying = start_worker("-c", "1")
    wait_for(lambda: record.jids("start") == [held], 15, "the priority job to start")
    dying.kill()
    plain = push(client, "testjobs.Noop", ["plain"], 0)
    r.sadd("paused", "default")  # the next worker recovers, but takes nothing yet
    restarted = start_worker("-c", "1", "-t", "1")
    wait_for(lambda: r.zcard("rfetch:prio:default") == 1, 30, restarted.log)
    [raw] = r.zrange("rfetch:prio:default", 0, -1)
    assert json.loads(raw)["jid"] == held and json.loads(raw)["priority"] == 3
    assert not list(r.scan_iter("queue:sq|*"))
    Api(Config(redis_url=redis_server.url), redis=r).queue("default").unpause()
    wait_for(lambda: record.pids("start", held) == [dying.pid, restarted.pid], 15,
             restarted.log)
    # One thread: had the plain job of the list been taken first, it would be done by now.
    assert not record.has("done", plain)
    restarted.signal(signal.SIGTERM)
    assert restarted.wait(15) == 0, restarted.log()


@pytest.mark.parametrize(
    "options",
    [{"priority": 5}, {"tenant": "acme"}, {"concurrency_key": "k", "concurrency_limit": 1}],
    ids=["priority", "tenant", "capped"],
)
def test_an_idle_single_queue_worker_takes_a_queues_first_staged_job_at_once(
    start_worker: StartWorker,
    redis_server: RedisServer,
    r: redis.Redis,
    record: Record,
    options: dict[str, object],
) -> None:
    """Priority, tenant and capped jobs wait outside ``queue:<q>``, where an idle worker
    blocks: the first of them must not wait for the worker's periodic look at which queues
    use them (every 30 s while idle), but be seen after a blocking fetch (1 s here)."""
    worker = start_worker("-c", "1", env={"RFETCH_BLOCK_TIMEOUT": "1"})
    client = client_of(redis_server, r)
    jid = client.push("testjobs.Noop", [1], {"queue": "default", **options})
    wait_for(lambda: jid in record.jids("done"), 15, "the queue's first staged job to run")
    worker.signal(signal.SIGTERM)
    assert worker.wait(15) == 0, worker.log()
