"""Bad input: malformed JSON, wrong shapes, unknown job names, non-JSON
arguments, oversized payloads and a key of the wrong type where a queue should be.

Each gives its documented behaviour and nothing else is lost: the worker processes (real
``rfetch worker`` subprocesses here) keep running the other jobs.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import WorkerProcess

FAST_ENV = {
    "RFETCH_POLL_INTERVAL_AVERAGE": "0.2",
    "RFETCH_POLL_INITIAL_WAIT": "0",
    "RFETCH_HEARTBEAT_INTERVAL": "0.5",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
}


@pytest.fixture
def client(redis_server: RedisServer, r: redis.Redis) -> Client:
    return Client(Config(redis_url=redis_server.url), r)


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    return WorkerDefaults(args=("-r", "testjobs", "-c", "3"), env=FAST_ENV)


def stop_worker(proc: WorkerProcess) -> None:
    proc.signal(signal.SIGTERM)
    code = proc.wait(15)
    assert code == 0, proc.log()


@pytest.fixture
def worker(start_worker: StartWorker) -> Iterator[WorkerProcess]:
    proc = start_worker()
    yield proc
    if proc.proc.poll() is None:
        stop_worker(proc)


MALFORMED = [
    b'{"class":"testjobs.Noop","args":[1',  # truncated JSON
    b"",  # empty
    b"null",
    b'"just a string"',
    b"[1, 2, 3]",  # JSON, but not an object
    b'{"args":[]}',  # no class
    b'{"class":"","args":[]}',  # empty class
    b'{"class":42,"args":[]}',  # class not a string
    b'{"class":"testjobs.Noop","args":{"a":1}}',  # args not a list
    b'{"class":"testjobs.Noop","args":"1"}',
]


def test_malformed_and_wrongly_shaped_payloads_go_to_dead_as_they_were(
    worker: WorkerProcess, client: Client, r: redis.Redis, record: Record
) -> None:
    before = [client.push("testjobs.Noop", [n]) for n in range(3)]
    for raw in MALFORMED:
        r.lpush("queue:default", raw)
    after = [client.push("testjobs.Noop", [n]) for n in range(3)]

    wait_for(lambda: len(record.jids("done")) == 6, 10, "the good jobs to run")
    wait_for(lambda: r.zcard("dead") == len(MALFORMED), 10, "the bad payloads to be buried")

    assert sorted(record.jids("done")) == sorted(before + after)
    assert sorted(r.zrange("dead", 0, -1)) == sorted(MALFORMED)
    assert r.zcard("retry") == 0
    assert r.llen("queue:default") == 0
    # the acknowledgement is deferred: it lands with the next fetch, soon after
    wait_for(lambda: not list(r.scan_iter("queue:sq|*")), 10, "the private list to empty")
    assert worker.proc.poll() is None
    # the worker's log lines are written by its writer thread, after the burial in Redis
    wait_for(lambda: "dead set" in worker.log(), 10, "the burial's log line")


def test_invalid_utf8_payload_goes_to_dead_with_its_exact_bytes(
    worker: WorkerProcess, client: Client, r: redis.Redis, record: Record
) -> None:
    raw = b'\xff\xfe{"class":"testjobs.Noop",\x80"args":[]}'
    r.lpush("queue:default", raw)
    jid = client.push("testjobs.Noop", [])

    wait_for(lambda: record.jids("done") == [jid], 10, "the good job to run")
    wait_for(lambda: r.zcard("dead") == 1, 10, "the bad payload to be buried")

    assert r.zrange("dead", 0, -1) == [raw]
    # the acknowledgement is deferred: it lands with the next fetch, soon after
    wait_for(lambda: not list(r.scan_iter("queue:sq|*")), 10, "the private list to empty")


def test_unknown_job_name_is_retried_then_dead_and_other_jobs_run(
    worker: WorkerProcess, client: Client, r: redis.Redis, record: Record
) -> None:
    unknown = client.push("myapp.jobs.NotDeployedYet", [1, "a"], {"retry": 1})
    good = [client.push("testjobs.Noop", [n]) for n in range(3)]

    wait_for(lambda: r.zcard("retry") == 1, 10, "the unknown job to be retried")
    wait_for(lambda: sorted(record.jids("done")) == sorted(good), 10, "the good jobs to run")
    job = json.loads(r.zrange("retry", 0, -1)[0])
    assert job["jid"] == unknown
    assert job["retry_count"] == 0
    assert job["error_class"] == "rfetch.errors.UnknownJob"
    assert "'myapp.jobs.NotDeployedYet'" in job["error_message"]
    assert job["args"] == [1, "a"]
    wait_for(lambda: f"jid={unknown}" in worker.log(), 10, "the retry's log line")

    r.zadd("retry", {r.zrange("retry", 0, -1)[0]: 1.0}, xx=True)  # due now
    wait_for(lambda: r.zcard("dead") == 1, 10, "the unknown job to die")
    dead = json.loads(r.zrange("dead", 0, -1)[0])
    assert dead["jid"] == unknown
    assert dead["retry_count"] == 1
    assert dead["error_class"] == "rfetch.errors.UnknownJob"
    assert r.zcard("retry") == 0
    assert r.llen("queue:default") == 0
    # the acknowledgement is deferred: it lands with the next fetch, soon after
    wait_for(lambda: not list(r.scan_iter("queue:sq|*")), 10, "the private list to empty")
    assert worker.proc.poll() is None


def test_wrong_key_type_for_the_only_queue_is_logged_and_worker_resumes_when_fixed(
    redis_server: RedisServer, r: redis.Redis, record: Record, start_worker: StartWorker
) -> None:
    r.set("queue:default", "x")
    proc = start_worker()
    try:
        wait_for(lambda: "WRONGTYPE" in proc.log(), 10, "the worker to log the WRONGTYPE error")
        identity = proc.identity(r)
        beat = float(r.hget(identity, "beat") or 0)
        wait_for(
            lambda: float(r.hget(identity, "beat") or 0) > beat, 5, "the heartbeat to go on"
        )
        assert proc.proc.poll() is None

        r.delete("queue:default")
        client = Client(Config(redis_url=redis_server.url), r)
        jid = client.push("testjobs.Noop", [])
        wait_for(lambda: record.jids("done") == [jid], 10, "the fixed queue to resume")
        assert r.llen("queue:default") == 0
        # the acknowledgement is deferred: it lands with the next fetch, soon after
        wait_for(lambda: not list(r.scan_iter("queue:sq|*")), 10, "the private list to empty")
    finally:
        if proc.proc.poll() is None:
            stop_worker(proc)


def test_wrong_key_type_for_a_queue_is_logged_and_other_queue_still_runs(
    redis_server: RedisServer, r: redis.Redis, record: Record, start_worker: StartWorker
) -> None:
    r.set("queue:default", "x")
    proc = start_worker("-q", "default", "-q", "other")
    try:
        client = Client(Config(redis_url=redis_server.url), r)
        other = client.push("testjobs.Noop", ["other"], {"queue": "other"})
        wait_for(lambda: record.jids("done") == [other], 60, "the job of the other queue")
        assert proc.proc.poll() is None
        log = proc.log()
        assert "WRONGTYPE" in log
        assert "queue:default" in log

        r.delete("queue:default")
        fixed = client.push("testjobs.Noop", ["default"])
        wait_for(lambda: record.jids("done") == [other, fixed], 10, "the fixed queue to resume")
        assert r.llen("queue:default") == 0
    finally:
        if proc.proc.poll() is None:
            stop_worker(proc)


# -- the client side: nothing is written ---------------------------------------------------


class Mailer(rfetch.Job):
    def perform(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ([dt.datetime(2020, 1, 1)], "args[0]"),
        ([1, {"when": {1, 2}}], "args[1]['when']"),
        ([{"ok": [1, {3: "int key"}]}], "args[0]['ok'][1]"),
        ([b"bytes"], "args[0]"),
        ([1.5, float("inf")], "args[1]"),
        ([object()], "args[0]"),
    ],
)
def test_non_json_args_raise_naming_the_path_and_write_nothing(
    client: Client, r: redis.Redis, args: list[Any], path: str
) -> None:
    setter = Mailer.set(client=client)
    calls = [
        lambda: setter.perform_async(*args),
        lambda: setter.perform_in(60, *args),
        lambda: setter.perform_at(dt.datetime.now(dt.timezone.utc), *args),
        lambda: setter.perform_bulk([["fine"], args, ["also fine"]]),
    ]
    for call in calls:
        with pytest.raises(rfetch.ArgsNotSerializable) as info:
            call()
        assert path in str(info.value)
        assert isinstance(info.value, TypeError)
    assert r.dbsize() == 0


def test_oversized_payload_raises_and_writes_nothing(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    small = Client(Config(redis_url=redis_server.url, max_payload_bytes=1000), r)
    setter = Mailer.set(client=small)
    setter.perform_async("x" * 500)  # under the limit: written
    r.flushall()

    calls = [
        lambda: setter.perform_async("x" * 2000),
        lambda: setter.perform_async("é" * 600),  # 600 characters, 1,200 bytes of UTF-8
        lambda: setter.perform_in(60, "x" * 2000),
        lambda: setter.perform_bulk([["fine"], ["x" * 2000], ["fine"]]),
    ]
    for call in calls:
        with pytest.raises(rfetch.PayloadTooLarge, match="1000 bytes"):
            call()
    assert r.dbsize() == 0


def test_default_payload_limit_is_one_mebibyte(client: Client, r: redis.Redis) -> None:
    setter = Mailer.set(client=client)
    with pytest.raises(rfetch.PayloadTooLarge):
        setter.perform_async("x" * (1024 * 1024))
    assert r.dbsize() == 0
    setter.perform_async("x" * (1024 * 1024 - 200))
    assert r.llen("queue:default") == 1
