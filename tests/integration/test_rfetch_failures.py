"""A job that makes rfetch itself fail never loops: real ``rfetch worker`` processes are given
payloads that break the failure path (fields producers own, of unexpected types), that
cannot be written back (nesting the encoder refuses), that break the parser in a way that
is not a ValueError (nesting deeper than the recursion limit), and a retry set Redis refuses
to write. Each job ends in the retry or dead set, with the error recorded, after a bounded
number of runs (``poison_max_recoveries``, 3 here), and the worker goes on with other jobs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import FAST_ENV, WorkerProcess

POISON_MAX = 3


def runs(record: Record) -> Counter[str]:
    """Runs per jid of the test jobs (every recorded event is one run)."""
    return Counter(fields[1] for fields in record.lines())


def push_raw(r: redis.Redis, *raws: str | bytes) -> None:
    for raw in raws:
        r.lpush("queue:default", raw)
    r.sadd("queues", "default")


def failing(jid: str, **fields: Any) -> str:
    """A job of the class that always raises, with ``fields`` as a producer wrote them."""
    payload = {"class": "testjobs.AlwaysFails", "args": [], "jid": jid, "queue": "default",
               "retry": True, **fields}
    return json.dumps(payload)


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    env = {**FAST_ENV, "RFETCH_POISON_MAX_RECOVERIES": str(POISON_MAX)}
    return WorkerDefaults(args=("-r", "testjobs", "-c", "2"), env=env)


@pytest.fixture
def worker(start_worker: StartWorker) -> Iterator[WorkerProcess]:
    proc = start_worker()
    yield proc
    proc.stop()


def entries(r: redis.Redis, zset: str) -> dict[str, dict[str, Any]]:
    out = {}
    for raw in r.zrange(zset, 0, -1):
        try:
            job = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        out[job["jid"]] = job
    return out


def nothing_left(r: redis.Redis) -> bool:
    """No job in the queue or in any private list."""
    private = list(r.scan_iter(match="queue:sq|*"))
    return r.llen("queue:default") == 0 and all(r.llen(k) == 0 for k in private)


@pytest.mark.parametrize(
    "fields",
    [
        {"backtrace": "x"},
        {"backtrace": [1]},
        {"retry_count": "x"},
        {"retry_count": True},
        {"error_message": {"a": 1}},
        {"retry_queue": {"a": 1}},
        {"failed_at": "x", "retried_at": [], "error_class": 7},
    ],
    ids=lambda f: ",".join(f"{k}={v!r}" for k, v in f.items()),
)
def test_producer_fields_of_unexpected_types_do_not_break_recording_the_failure(
    worker: WorkerProcess, r: redis.Redis, record: Record, fields: dict[str, Any]
) -> None:
    push_raw(r, failing("odd", **fields))
    wait_for(lambda: "odd" in entries(r, "retry"), 15, lambda: f"the retry set:\n{worker.log()}")
    job = entries(r, "retry")["odd"]
    assert job["error_class"] == "RuntimeError"
    assert job["error_message"] == "always fails"
    assert job["retry_count"] == 0
    assert job["queue"] == "default"
    assert nothing_left(r)
    assert runs(record) == {"odd": 1}


def test_a_failure_redis_refuses_to_record_ends_in_the_dead_set_with_the_error(
    worker: WorkerProcess, r: redis.Redis, record: Record
) -> None:
    r.set("retry", "not a sorted set")  # the retry set, made unwritable
    push_raw(r, failing("refused"))
    wait_for(lambda: r.zcard("dead") == 1, 30, lambda: f"the dead set:\n{worker.log()}")
    job = entries(r, "dead")["refused"]
    assert job["error_class"] == "redis.exceptions.ResponseError"
    assert job["error_message"].startswith("rfetch failed on this job 3 times")
    assert "WRONGTYPE retry is a string" in job["error_message"]
    assert runs(record) == {"refused": POISON_MAX}
    assert nothing_left(r)
    assert "it will be pushed back" not in worker.log()


# 1010: orjson parses it (1,024 levels) but the encoders cannot write it back; beyond
# rfetch's own limit (rfetch.jobs.payload.MAX_NESTING, 512) it is invalid before it runs.
@pytest.mark.parametrize("depth", [1010, 1500, 100_000])
def test_json_nested_deeper_than_the_parser_goes_to_the_dead_set_as_it_was(
    worker: WorkerProcess, r: redis.Redis, record: Record, depth: int
) -> None:
    deep = '{"class":"testjobs.Noop","jid":"deep","args":' + nested(depth) + "}"
    push_raw(r, deep, json.dumps({"class": "testjobs.Noop", "args": [], "jid": "after"}))
    wait_for(lambda: r.zcard("dead") == 1 and runs(record)["after"] == 1, 30,
             lambda: f"the dead set and the next job:\n{worker.log()}")
    assert r.zrange("dead", 0, -1) == [deep.encode()]  # byte for byte
    assert runs(record) == {"after": 1}  # the deep one never ran
    assert nothing_left(r)
    wait_for(lambda: "invalid job in queue default sent to the dead set" in worker.log(), 10,
             "the burial's log line (written by the worker's log writer thread)")


def test_an_async_job_whose_failure_redis_refuses_ends_in_the_dead_set(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    # The event loop's path: the failure is recorded in the loop's executor, and rfetch's
    # own error there is bounded as a thread's is (not swept back to run again forever).
    proc = WorkerProcess(
        redis_server.url,
        ["-r", "async_jobs", "-c", "2"],
        env={**FAST_ENV, "RFETCH_POISON_MAX_RECOVERIES": str(POISON_MAX)},
        log_dir=tmp_path,
    )
    try:
        proc.identity(r)
        r.set("retry", "not a sorted set")
        payload = {"class": "async_jobs.Fails", "args": [], "jid": "async-refused",
                   "queue": "default", "retry": True}
        push_raw(r, json.dumps(payload))
        wait_for(lambda: r.zcard("dead") == 1, 30, lambda: f"the dead set:\n{proc.log()}")
        job = entries(r, "dead")["async-refused"]
        assert job["error_message"].startswith("rfetch failed on this job 3 times")
        assert "WRONGTYPE retry is a string" in job["error_message"]
        assert nothing_left(r)
    finally:
        proc.stop()
