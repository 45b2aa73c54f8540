"""Retries, the dead set, scheduled jobs and error handlers, against a real redis-server.

Most tests drive the worker's parts in-process (fetch one job, ``Processor.process`` it,
``Poller.enqueue_due``) so that each step can be checked in Redis; one test runs a real
``rfetch worker`` subprocess through a whole retry cycle with its own poller.
SIDEKIQ.md "Retries and death" is the reference for every expected value.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.jobs.job import RetryDecision
from rfetch.push.client import Client
from rfetch.worker.retry import decompress_backtrace
from tests.support.gate_worker import Worker, make_due, running
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

# -- jobs run in this process ---------------------------------------------------------------

CALLS: list[tuple[str, Any]] = []
"""(event, detail) appended by the jobs and hooks below; cleared before each test."""


class Boom(rfetch.Job):
    """Always raises ``RuntimeError("boom <args>")``."""

    retry = 2

    def perform(self, *args: Any) -> None:
        CALLS.append(("perform", self.jid))
        raise RuntimeError(f"boom {' '.join(map(str, args))}")


class Exhausts(rfetch.Job):
    """Raises a fresh exception each run, kept for identity checks in ``retries_exhausted``."""

    retry = 1
    raised: ClassVar[list[BaseException]] = []

    def perform(self, *args: Any) -> None:
        exc = ValueError(f"attempt {len(self.raised)}")
        self.raised.append(exc)
        raise exc

    def retries_exhausted(self, job: dict[str, Any], exc: BaseException) -> None:
        CALLS.append(("exhausted", (dict(job), exc)))


class RetryIn(rfetch.Job):
    """Fails; its ``retry_in`` returns the first argument (seconds, "discard" or "kill")."""

    retry = 25

    def perform(self, decision: Any) -> None:
        raise LookupError("retry_in decides")

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> RetryDecision:
        CALLS.append(("retry_in", (count, exc, job["jid"])))
        decision: RetryDecision = job["args"][0]
        return decision

    def retries_exhausted(self, job: dict[str, Any], exc: BaseException) -> None:
        CALLS.append(("exhausted", (dict(job), exc)))


class Ok(rfetch.Job):
    def perform(self, *args: Any) -> None:
        CALLS.append(("perform", self.jid))


JOBS: list[type[rfetch.Job]] = [Boom, Exhausts, RetryIn, Ok]


def events(name: str) -> list[Any]:
    return [detail for event, detail in CALLS if event == name]


@pytest.fixture(autouse=True)
def _clear_calls() -> Iterator[None]:
    CALLS.clear()
    Exhausts.raised.clear()
    yield
    CALLS.clear()


@pytest.fixture
def cfg(redis_server: RedisServer, r: redis.Redis) -> Config:
    return Config(
        redis_url=redis_server.url,
        block_timeout=0.2,
        poll_interval_average=0.1,
        poll_initial_wait=0.0,
    )


@pytest.fixture
def worker(cfg: Config) -> Iterator[Worker]:
    with running(cfg, JOBS) as w:
        yield w


def zentries(r: redis.Redis, key: str) -> list[tuple[dict[str, Any], float]]:
    return [(json.loads(raw), score) for raw, score in r.zrange(key, 0, -1, withscores=True)]


def only_entry(r: redis.Redis, key: str) -> tuple[dict[str, Any], float]:
    entries = zentries(r, key)
    assert len(entries) == 1, f"{key} holds {len(entries)} entries"
    return entries[0]


# -- retries ---------------------------------------------------------------------------------


def test_failure_goes_to_retry_with_sidekiq_fields_then_dead(
    worker: Worker, r: redis.Redis
) -> None:
    before = time.time()
    jid = worker.client.push(Boom.job_name(), ["x", 1], {"retry": 2})
    original = json.loads(r.lindex("queue:default", 0))  # type: ignore[arg-type]

    worker.work_one()
    after = time.time()

    # Acknowledged in the same step as the retry entry was written.
    assert worker.private_lengths() == 0
    assert r.llen("queue:default") == 0
    assert r.zcard("dead") == 0
    job, score = only_entry(r, "retry")
    assert job["jid"] == jid
    assert job["retry_count"] == 0
    assert before <= job["failed_at"] <= after
    assert "retried_at" not in job
    assert job["error_message"] == "boom x 1"
    assert job["error_class"] == "RuntimeError"
    assert "error_backtrace" not in job
    assert job["created_at"] == original["created_at"]
    assert job["args"] == ["x", 1]
    # Sidekiq: count**4 + 15 + rand(10) * (count + 1) with count 0 -> 15..24 s.
    delay = score - job["failed_at"]
    assert 15 <= delay <= 24 + 1e-3
    assert abs(delay - round(delay)) < 1e-3

    make_due(r, "retry")
    assert worker.poller.enqueue_due() == 1
    assert r.zcard("retry") == 0
    requeued = json.loads(r.lindex("queue:default", 0))  # type: ignore[arg-type]
    assert requeued["enqueued_at"] > original["enqueued_at"]
    assert r.sismember("queues", "default")

    worker.work_one()
    job2, score2 = only_entry(r, "retry")
    assert job2["jid"] == jid
    assert job2["retry_count"] == 1
    assert job2["failed_at"] == job["failed_at"]
    assert job2["retried_at"] >= job["failed_at"]
    # count 1: 1 + 15 + rand(10) * 2 -> 16..34 s.
    assert 16 <= score2 - job2["retried_at"] <= 34 + 1e-3

    make_due(r, "retry")
    assert worker.poller.enqueue_due() == 1
    worker.work_one()
    assert r.zcard("retry") == 0
    dead, died_at = only_entry(r, "dead")
    assert dead["jid"] == jid
    assert dead["retry_count"] == 2
    assert abs(died_at - dead["retried_at"]) < 5
    assert worker.private_lengths() == 0
    assert r.llen("queue:default") == 0
    assert events("perform") == [jid, jid, jid]


def test_retry_true_uses_config_max_retries(cfg: Config, r: redis.Redis) -> None:
    worker = Worker(cfg.replace(max_retries=1), JOBS)
    jid = worker.client.push(Boom.job_name(), [], {"retry": True})

    worker.work_one()
    assert only_entry(r, "retry")[0]["retry_count"] == 0
    make_due(r, "retry")
    worker.poller.enqueue_due()
    worker.work_one()

    assert r.zcard("retry") == 0
    dead, _ = only_entry(r, "dead")
    assert (dead["jid"], dead["retry_count"]) == (jid, 1)


def test_payload_without_retry_field_takes_the_job_class_option(
    worker: Worker, r: redis.Redis
) -> None:
    """Sidekiq (job_retry.rb): ``msg["retry"]`` nil -> the job class's ``retry`` option.
    A producer that leaves the field out must not lose the class's retries."""
    r.lpush("queue:default", json.dumps({"class": Boom.job_name(), "args": [], "jid": "a" * 24}))

    worker.work_one()  # Boom.retry = 2

    assert r.zcard("dead") == 0
    job, _ = only_entry(r, "retry")
    assert job["jid"] == "a" * 24
    assert job["retry_count"] == 0


def test_failed_job_already_pushed_back_is_not_also_retried(
    worker: Worker, r: redis.Redis
) -> None:
    """The retry entry is written only together with the ack (Sidekiq #4112)."""
    worker.client.push(Boom.job_name(), [], {"retry": 2})
    unit = worker.take()
    assert worker.fetch.requeue([unit]) == 1  # as shutdown or orphan recovery would

    worker.processor.process(unit)

    assert r.zcard("retry") == 0
    assert r.zcard("dead") == 0
    assert r.llen("queue:default") == 1
    assert worker.private_lengths() == 0


def test_retry_zero_goes_straight_to_dead_and_runs_hooks_once(
    cfg: Config, r: redis.Redis
) -> None:
    deaths: list[tuple[dict[str, Any], BaseException]] = []
    worker = Worker(cfg.replace(death_handlers=[lambda j, e: deaths.append((j, e))]), JOBS)
    jid = worker.client.push(Exhausts.job_name(), [], {"retry": 0})

    worker.work_one()

    assert r.zcard("retry") == 0
    dead, _ = only_entry(r, "dead")
    assert dead["jid"] == jid
    assert dead["retry_count"] == 0
    assert dead["error_class"] == "ValueError"
    assert worker.private_lengths() == 0
    [(job, exc)] = events("exhausted")
    assert job["jid"] == jid
    assert exc is Exhausts.raised[0]
    assert [(j["jid"], e) for j, e in deaths] == [(jid, Exhausts.raised[0])]


def test_retry_false_neither_retries_nor_buries_but_runs_death_handlers(
    cfg: Config, r: redis.Redis
) -> None:
    deaths: list[tuple[dict[str, Any], BaseException]] = []
    worker = Worker(cfg.replace(death_handlers=[lambda j, e: deaths.append((j, e))]), JOBS)
    jid = worker.client.push(Boom.job_name(), ["no"], {"retry": False})

    worker.work_one()

    assert r.zcard("retry") == 0
    assert r.zcard("dead") == 0
    assert r.llen("queue:default") == 0
    assert worker.private_lengths() == 0
    [(job, exc)] = deaths
    assert job["jid"] == jid
    assert isinstance(exc, RuntimeError)
    assert str(exc) == "boom no"


def test_dead_false_discards_at_death_and_runs_hooks(cfg: Config, r: redis.Redis) -> None:
    deaths: list[tuple[dict[str, Any], BaseException]] = []
    worker = Worker(cfg.replace(death_handlers=[lambda j, e: deaths.append((j, e))]), JOBS)
    jid = worker.client.push(Exhausts.job_name(), [], {"retry": 0, "dead": False})

    worker.work_one()

    assert r.zcard("retry") == 0
    assert r.zcard("dead") == 0
    assert worker.private_lengths() == 0
    assert r.llen("queue:default") == 0
    assert [j["jid"] for j, _ in events("exhausted")] == [jid]
    assert [(j["jid"], e) for j, e in deaths] == [(jid, Exhausts.raised[0])]


def test_retries_exhausted_called_once_with_job_and_exception(
    worker: Worker, r: redis.Redis
) -> None:
    jid = Exhausts.set(client=worker.client).perform_async("a")  # class option retry = 1

    worker.work_one()
    assert events("exhausted") == []
    assert only_entry(r, "retry")[0]["retry_count"] == 0

    make_due(r, "retry")
    worker.poller.enqueue_due()
    worker.work_one()

    [(job, exc)] = events("exhausted")
    assert job["jid"] == jid
    assert job["retry_count"] == 1
    assert job["error_message"] == "attempt 1"
    assert exc is Exhausts.raised[1]
    assert only_entry(r, "dead")[0]["jid"] == jid


def test_retry_in_seconds_sets_the_delay(worker: Worker, r: redis.Redis) -> None:
    jid = worker.client.push(RetryIn.job_name(), [1000], {"retry": 25})

    worker.work_one()

    job, score = only_entry(r, "retry")
    assert job["jid"] == jid
    assert score - job["failed_at"] == pytest.approx(1000, abs=1e-3)
    [(count, exc, seen_jid)] = events("retry_in")
    assert count == 0
    assert isinstance(exc, LookupError)
    assert seen_jid == jid


def test_retry_in_discard_drops_the_job(cfg: Config, r: redis.Redis) -> None:
    deaths: list[Any] = []
    worker = Worker(cfg.replace(death_handlers=[lambda j, e: deaths.append(j)]), JOBS)
    worker.client.push(RetryIn.job_name(), ["discard"], {"retry": 25})

    worker.work_one()

    assert r.zcard("retry") == 0
    assert r.zcard("dead") == 0
    assert r.llen("queue:default") == 0
    assert worker.private_lengths() == 0
    assert events("exhausted") == []
    assert deaths == []


def test_retry_in_kill_sends_to_dead_at_once(cfg: Config, r: redis.Redis) -> None:
    deaths: list[Any] = []
    worker = Worker(cfg.replace(death_handlers=[lambda j, e: deaths.append(j)]), JOBS)
    jid = worker.client.push(RetryIn.job_name(), ["kill"], {"retry": 25})

    worker.work_one()

    assert r.zcard("retry") == 0
    dead, _ = only_entry(r, "dead")
    assert dead["jid"] == jid
    assert dead["retry_count"] == 0
    assert [j["jid"] for j, _ in events("exhausted")] == [jid]
    assert [j["jid"] for j in deaths] == [jid]


def test_retry_queue_moves_the_retried_job(worker: Worker, r: redis.Redis) -> None:
    jid = worker.client.push(Boom.job_name(), [], {"retry": 2, "retry_queue": "low"})

    worker.work_one()
    job, _ = only_entry(r, "retry")
    assert job["queue"] == "low"
    assert job["retry_queue"] == "low"

    make_due(r, "retry")
    assert worker.poller.enqueue_due() == 1
    assert r.llen("queue:default") == 0
    [raw] = r.lrange("queue:low", 0, -1)
    assert json.loads(raw)["jid"] == jid
    assert r.sismember("queues", "low")


@pytest.mark.parametrize("option", [True, 2])
def test_backtrace_option_stores_a_readable_backtrace(
    worker: Worker, r: redis.Redis, option: bool | int
) -> None:
    worker.client.push(Boom.job_name(), [], {"retry": 2, "backtrace": option})

    worker.work_one()

    job, _ = only_entry(r, "retry")
    lines = decompress_backtrace(job["error_backtrace"])
    assert all(isinstance(line, str) for line in lines)
    # Innermost first, as Sidekiq: the job's own perform is the first line.
    assert Path(__file__).name in lines[0]
    assert "in `perform'" in lines[0]
    if option is True:
        assert len(lines) > 2
    else:
        assert len(lines) == 2


def test_error_handlers_get_the_exception_and_the_job(cfg: Config, r: redis.Redis) -> None:
    seen: list[tuple[BaseException, dict[str, Any]]] = []
    worker = Worker(cfg.replace(error_handlers=[lambda e, c: seen.append((e, c))]), JOBS)
    jid = worker.client.push(Boom.job_name(), ["h"], {"retry": 2})
    worker.client.push(Ok.job_name(), [])

    worker.work_one()
    worker.work_one()

    [(exc, context)] = seen
    assert isinstance(exc, RuntimeError)
    assert str(exc) == "boom h"
    assert context["jid"] == jid
    assert context["queue"] == "default"
    assert context["job"]["class"] == Boom.job_name()
    assert context["job"]["args"] == ["h"]


# -- the dead set ----------------------------------------------------------------------------


def test_dead_set_is_capped_at_dead_max_jobs(cfg: Config, r: redis.Redis) -> None:
    worker = Worker(cfg.replace(dead_max_jobs=3), JOBS)
    jids = []
    for n in range(5):
        jids.append(worker.client.push(Boom.job_name(), [n], {"retry": 0}))
        worker.work_one()
        assert r.zcard("dead") == min(n + 1, 3)

    # The oldest deaths are trimmed, the newest kept.
    assert [job["jid"] for job, _ in zentries(r, "dead")] == jids[2:]


def test_dead_set_drops_entries_older_than_dead_timeout(cfg: Config, r: redis.Redis) -> None:
    worker = Worker(cfg.replace(dead_timeout=60.0), JOBS)
    now = time.time()
    r.zadd("dead", {'{"jid":"old"}': now - 120, '{"jid":"recent"}': now - 30})

    jid = worker.client.push(Boom.job_name(), [], {"retry": 0})
    worker.work_one()

    assert sorted(job["jid"] for job, _ in zentries(r, "dead")) == sorted(["recent", jid])


# -- scheduled jobs --------------------------------------------------------------------------


def test_scheduled_jobs_run_only_after_their_time_with_a_fresh_enqueued_at(
    cfg: Config, r: redis.Redis
) -> None:
    ran: list[tuple[dict[str, Any], float]] = []

    def capture(job: rfetch.Job, payload: dict[str, Any], queue: str, call_next: Any) -> None:
        ran.append((dict(payload), time.time()))
        call_next()

    worker = Worker(cfg.replace(server_middleware=[capture]), JOBS)
    setter = Ok.set(client=worker.client)
    in_jid = setter.perform_in(dt.timedelta(seconds=0.8), "in")
    at_jid = setter.perform_at(dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1.2), "at")
    scheduled = {job["jid"]: (job, score) for job, score in zentries(r, "schedule")}
    assert set(scheduled) == {in_jid, at_jid}
    for job, _ in scheduled.values():
        assert "enqueued_at" not in job
        assert "at" not in job
    assert r.llen("queue:default") == 0
    assert worker.poller.enqueue_due() == 0  # nothing due yet

    with worker.pool():
        wait_for(lambda: len(ran) == 2, 10, "both scheduled jobs to run")

    assert r.zcard("schedule") == 0
    for payload, ran_at in ran:
        job, at = scheduled[payload["jid"]]
        assert ran_at >= at, "a scheduled job ran before its time"
        assert payload["enqueued_at"] >= at
        assert payload["enqueued_at"] > job["created_at"]
        assert "at" not in payload
    assert [p["jid"] for p, _ in ran] == [in_jid, at_jid]


def redis_now(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1_000_000


@pytest.mark.parametrize("zset", ["schedule", "retry"])
def test_poller_uses_redis_clock_when_worker_clock_is_behind(
    worker: Worker, r: redis.Redis, monkeypatch: pytest.MonkeyPatch, zset: str
) -> None:
    """Due by Redis's clock, in the future by the worker's: it moves."""
    real_time = time.time
    score = redis_now(r) - 0.5
    r.zadd(zset, {'{"class":"X","args":[],"jid":"j1","queue":"default"}': score})
    monkeypatch.setattr(time, "time", lambda: real_time() - 3600)

    assert worker.poller.enqueue_due() == 1

    monkeypatch.undo()
    assert r.zcard(zset) == 0
    [raw] = r.lrange("queue:default", 0, -1)
    assert json.loads(raw)["enqueued_at"] >= score  # stamped by Redis's clock too


@pytest.mark.parametrize("zset", ["schedule", "retry"])
def test_poller_uses_redis_clock_when_worker_clock_is_ahead(
    worker: Worker, r: redis.Redis, monkeypatch: pytest.MonkeyPatch, zset: str
) -> None:
    """In the future by Redis's clock, long due by the worker's: it stays."""
    real_time = time.time
    r.zadd(zset, {'{"class":"X","args":[],"jid":"j1","queue":"default"}': redis_now(r) + 30})
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)

    assert worker.poller.enqueue_due() == 0

    monkeypatch.undo()
    assert r.zcard(zset) == 1
    assert r.llen("queue:default") == 0


def test_poller_moves_every_due_job_in_batches_keeping_their_bytes(
    worker: Worker, r: redis.Redis
) -> None:
    past = redis_now(r) - 10
    future = redis_now(r) + 3600
    due = {
        f'{{"class":"X","args":[12345678901234567890,0.1,"{n}"],"jid":"d{n}",'
        f'"queue":"q{n % 2}","enqueued_at":1.5,"created_at":1.0}}': past
        for n in range(250)
    }
    r.zadd("schedule", {**due, '{"class":"X","args":[],"jid":"later","queue":"q0"}': future})
    r.zadd("schedule", {"not json at all": past})

    assert worker.poller.enqueue_due() == 251

    assert r.zrange("schedule", 0, -1) == [b'{"class":"X","args":[],"jid":"later","queue":"q0"}']
    assert r.llen("queue:q0") == 125
    assert r.llen("queue:q1") == 125
    assert r.smembers("queues") == {b"q0", b"q1"}
    moved = r.lrange("queue:q0", 0, -1) + r.lrange("queue:q1", 0, -1)
    for raw in moved:
        text = raw.decode()
        assert '"args":[12345678901234567890,0.1,' in text  # untouched bytes
        job = json.loads(text)
        assert job["enqueued_at"] >= past
        assert job["created_at"] == 1.0
    assert len({json.loads(raw)["jid"] for raw in moved}) == 250
    # An entry that is not a job goes to the dead set as it was.
    assert r.zrange("dead", 0, -1) == [b"not json at all"]


def test_poller_replaces_only_the_top_level_enqueued_at(
    worker: Worker, r: redis.Redis
) -> None:
    past = redis_now(r) - 1
    without = (
        '{"class":"X","args":[{"enqueued_at":1},"\\"enqueued_at\\":2"],"queue":"a","jid":"w"}'
    )
    nested_first = (
        '{"class":"X","args":[{"enqueued_at":1}],"meta":{"enqueued_at":3},'
        '"enqueued_at" : 7,"queue":"b","jid":"n"}'
    )
    r.zadd("retry", {without: past, nested_first: past})

    assert worker.poller.enqueue_due() == 2

    [raw_a] = r.lrange("queue:a", 0, -1)
    [raw_b] = r.lrange("queue:b", 0, -1)
    job_a, job_b = json.loads(raw_a), json.loads(raw_b)
    assert job_a["args"] == [{"enqueued_at": 1}, '"enqueued_at":2']
    assert job_a["enqueued_at"] >= past
    assert job_b["args"] == [{"enqueued_at": 1}]
    assert job_b["meta"] == {"enqueued_at": 3}
    assert job_b["enqueued_at"] >= past
    assert raw_b.count(b"enqueued_at") == 3


# -- a real worker process through a whole retry cycle ---------------------------------------


def read_events(path: Path, event: str) -> list[str]:
    if not path.exists():
        return []
    return [line.split()[1] for line in path.read_text().splitlines() if line.split()[0] == event]


def test_real_worker_retries_with_its_poller_then_buries(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    record = tmp_path / "record.txt"
    proc = WorkerProcess(
        redis_server.url,
        ["-r", "testjobs", "-c", "2"],
        env={
            "RFETCH_TEST_RECORD": str(record),
            "RFETCH_POLL_INTERVAL_AVERAGE": "0.2",
            "RFETCH_POLL_INITIAL_WAIT": "0",
            "RFETCH_HEARTBEAT_INTERVAL": "0.5",
            "RFETCH_BLOCK_TIMEOUT": "0.5",
        },
        log_dir=tmp_path,
    )
    try:
        proc.identity(r)
        client = Client(Config(redis_url=redis_server.url), r)
        jid = client.push("testjobs.AlwaysFails", ["e2e"], {"retry": 2})

        def retry_entry(count: int) -> Callable[[], bool]:
            def check() -> bool:
                entries = zentries(r, "retry")
                return len(entries) == 1 and entries[0][0]["retry_count"] == count

            return check

        wait_for(retry_entry(0), 10, "the first retry entry")
        job, score = only_entry(r, "retry")
        assert job["jid"] == jid
        assert job["error_class"] == "RuntimeError"
        assert job["error_message"] == "always fails"
        assert 15 <= score - job["failed_at"] <= 24 + 1e-3
        assert read_events(record, "fail") == [jid]

        make_due(r, "retry")
        wait_for(retry_entry(1), 10, "the second retry entry")
        job, score = only_entry(r, "retry")
        assert 16 <= score - job["retried_at"] <= 34 + 1e-3

        make_due(r, "retry")
        wait_for(lambda: r.zcard("dead") == 1, 10, "the job to die")
        dead, _ = only_entry(r, "dead")
        assert dead["jid"] == jid
        assert dead["retry_count"] == 2
        assert r.zcard("retry") == 0
        assert read_events(record, "fail") == [jid, jid, jid]
        wait_for(lambda: r.get("stat:failed") == b"3", 10, "stat:failed to be flushed")
        assert r.get("stat:processed") == b"3"
        assert r.llen("queue:default") == 0
        # the acknowledgement is deferred: it lands with the next fetch, soon after
        wait_for(lambda: not list(r.scan_iter("queue:sq|*")), 10, "the private list to empty")
    finally:
        proc.signal(signal.SIGTERM)
        code = proc.wait(15)
    assert code == 0, proc.log()
