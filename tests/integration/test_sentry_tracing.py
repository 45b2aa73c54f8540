"""Sentry performance and Crons: a transaction per job run that continues the producer's
trace, and check-ins for periodic jobs, sent by sentry-sdk's own client to a recording
transport (no network).

Jobs are pushed by rfetch's Client (periodic ones by the leader's PeriodicJobBuilder, through
the client middleware) and run by the worker's real parts (``ReliableFetch``,
``Processor.process``) against the session redis-server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import sentry_sdk
from click.testing import CliRunner

import rfetch
from rfetch.cli import main
from rfetch.config import Config
from rfetch.integrations.sentry import SentryErrorHandler
from rfetch.jobs.schedule import Schedule
from rfetch.periodic.jobs import PeriodicJobBuilder
from rfetch.push.client import Client
from rfetch.worker.registry import Registry
from tests.support.gate_worker import Launch, Worker, running
from tests.support.redis_server import RedisServer
from tests.support.sentry import DSN, RecordingTransport, start_sentry
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess


class Fails(rfetch.Job):
    retry = 3

    def perform(self, *args: Any) -> None:
        logging.getLogger("myapp").warning("failing step of %s", self.jid)
        raise ValueError("failed")


class Ok(rfetch.Job):
    def perform(self, *args: Any) -> None:
        logging.getLogger("myapp").warning("step of %s", self.jid)
        sentry_sdk.capture_message("inside the job")


class AsyncOk(rfetch.Job):
    async def perform(self, *args: Any) -> None:
        await asyncio.sleep(0.05)  # the other async job runs meanwhile, on the same loop
        sentry_sdk.capture_message(f"inside {self.jid}")


class AsyncFails(rfetch.Job):
    retry = 3

    async def perform(self, *args: Any) -> None:
        await asyncio.sleep(0.05)
        raise ValueError("async failure")


@pytest.fixture
def cfg(redis_server: RedisServer, r: redis.Redis) -> Config:
    return Config(redis_url=redis_server.url, block_timeout=0.2)


@pytest.fixture
def parts(cfg: Config) -> Iterator[Worker]:
    with running(cfg, [Fails, Ok]) as p:
        yield p


def trace_of(event: dict[str, Any]) -> dict[str, Any]:
    trace: dict[str, Any] = event["contexts"]["trace"]
    return trace


def queued_payload(r: redis.Redis, queue: str) -> dict[str, Any]:
    """The one job waiting in ``queue``."""
    [raw] = r.lrange(f"queue:{queue}", 0, -1)
    payload: dict[str, Any] = json.loads(raw)
    return payload


# -- transactions -----------------------------------------------------------------------------


def test_a_job_run_is_a_transaction_named_by_its_class(
    cfg: Config, parts: Worker, transport: RecordingTransport
) -> None:
    start_sentry(cfg, transport, traces_sample_rate=1.0)
    jid = parts.client.push(Ok.job_name(), [1])

    parts.work_one()

    [transaction] = transport.transactions()
    assert transaction["transaction"] == f"rfetch/{Ok.job_name()}"
    assert transaction["transaction_info"] == {"source": "task"}
    trace = trace_of(transaction)
    assert (trace["op"], trace["status"], trace["origin"]) == (
        "queue.task.rfetch", "ok", "auto.queue.rfetch"
    )
    assert trace["data"]["messaging.message.id"] == jid
    assert trace["data"]["messaging.destination.name"] == "default"
    assert trace["data"]["messaging.message.retry.count"] == 0
    assert trace["data"]["messaging.message.receive.latency"] >= 0
    # What the job itself sends carries the job's tags and belongs to its transaction.
    [message] = transport.events()
    assert message["tags"] == {"jid": jid, "queue": "default", "job_class": Ok.job_name()}
    assert trace_of(message)["trace_id"] == trace["trace_id"]


def test_a_failed_run_is_an_internal_error_transaction_and_its_error_is_in_its_trace(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport, traces_sample_rate=1.0)
    jid = parts.client.push(Fails.job_name(), [])

    parts.work_one()

    [transaction] = transport.transactions()
    assert transaction["transaction"] == f"rfetch/{Fails.job_name()}"
    assert trace_of(transaction)["status"] == "internal_error"
    # The error handler's event (job context, as before) is in the run's trace.
    [event] = transport.events()
    assert event["tags"]["jid"] == jid
    assert event["contexts"]["rfetch"]["class"] == Fails.job_name()
    assert trace_of(event)["trace_id"] == trace_of(transaction)["trace_id"]
    assert r.zcard("retry") == 1


def test_the_run_continues_the_trace_of_the_push_through_its_retries(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport, traces_sample_rate=1.0)
    with sentry_sdk.start_transaction(name="POST /orders", op="http.server") as request:
        jid = parts.client.push(Fails.job_name(), [])
    trace_id = request.trace_id

    headers = queued_payload(r, "default")["trace_propagation_headers"]
    assert headers["sentry-trace"].startswith(f"{trace_id}-")
    assert f"sentry-trace_id={trace_id}" in headers["baggage"]
    parts.work_one()
    r.zadd("retry", {member: 1.0 for member in r.zrange("retry", 0, -1)}, xx=True)
    assert parts.poller.enqueue_due() == 1
    parts.work_one()

    [web, first, retry] = transport.transactions()
    # The push is a span of the request, and each run a child of that span.
    [submit] = [s for s in web["spans"] if s["op"] == "queue.submit.rfetch"]
    assert submit["description"] == Fails.job_name()
    assert submit["data"]["messaging.message.id"] == jid
    for run in (first, retry):
        assert trace_of(run)["trace_id"] == trace_id
        assert trace_of(run)["parent_span_id"] == submit["span_id"]
    assert trace_of(retry)["data"]["messaging.message.retry.count"] == 1
    assert [trace_of(e)["trace_id"] for e in transport.events()] == [trace_id, trace_id]


def test_without_tracing_a_failure_is_still_in_the_trace_of_its_push(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport)  # no traces sample rate: no transactions, traces all the same
    parts.client.push(Fails.job_name(), [])
    pushed = queued_payload(r, "default")["trace_propagation_headers"]["sentry-trace"]

    parts.work_one()

    assert transport.transactions() == []
    [event] = transport.events()
    assert trace_of(event)["trace_id"] == pushed.split("-")[0]


def test_a_failure_event_has_its_run_s_breadcrumbs_and_no_earlier_job_s(
    cfg: Config, parts: Worker, transport: RecordingTransport
) -> None:
    start_sentry(cfg, transport)  # no tracing: the scope is the job's all the same
    earlier = parts.client.push(Ok.job_name(), [])
    jid = parts.client.push(Fails.job_name(), [])

    parts.work_one()
    parts.work_one()

    [_, event] = transport.events()
    assert exception_of_event(event) == "ValueError"
    messages = [crumb.get("message") for crumb in event["breadcrumbs"]["values"]]
    assert f"failing step of {jid}" in messages
    assert f"step of {earlier}" not in messages
    assert event["tags"]["retry_count"] == "0"


def test_install_keeps_the_application_s_own_handler_in_the_job_s_trace(
    cfg: Config, parts: Worker, transport: RecordingTransport
) -> None:
    cfg.error_handlers.append(SentryErrorHandler(include_args=False))
    start_sentry(cfg, transport, traces_sample_rate=1.0)
    parts.client.push(Fails.job_name(), ["secret@example.com"])

    parts.work_one()

    assert [type(h) for h in cfg.error_handlers] == [SentryErrorHandler]
    [transaction] = transport.transactions()
    [event] = transport.events()
    assert "args" not in event["contexts"]["rfetch"]
    assert trace_of(event)["trace_id"] == trace_of(transaction)["trace_id"]


def exception_of_event(event: dict[str, Any]) -> str:
    kind: str = event["exception"]["values"][-1]["type"]
    return kind


def test_async_jobs_each_have_their_transaction_and_scope_on_the_event_loop(
    cfg: Config, launch: Launch, transport: RecordingTransport
) -> None:
    launched = launch(cfg, [AsyncOk, AsyncFails])
    start_sentry(cfg, transport, traces_sample_rate=1.0)
    ok = launched.client.push(AsyncOk.job_name(), [])
    failed = launched.client.push(AsyncFails.job_name(), [])

    launched.start()
    wait_for(lambda: len(transport.transactions()) == 2, 20, "two transactions")
    wait_for(lambda: len(transport.events()) == 2, 20, "two events")

    by_jid = {trace_of(t)["data"]["messaging.message.id"]: t for t in transport.transactions()}
    assert by_jid[ok]["transaction"] == f"rfetch/{AsyncOk.job_name()}"
    assert trace_of(by_jid[ok])["status"] == "ok"
    assert trace_of(by_jid[failed])["status"] == "internal_error"
    for event in transport.events():
        jid = event["tags"]["jid"]
        assert trace_of(event)["trace_id"] == trace_of(by_jid[jid])["trace_id"]
    [message] = [e for e in transport.events() if "message" in e or "logentry" in e]
    assert message["tags"]["jid"] == ok


def test_a_worker_process_continues_the_trace_of_a_push_from_this_process(
    cfg: Config, transport: RecordingTransport, redis_server: RedisServer, r: redis.Redis,
    tmp_path: Path,
) -> None:
    # The application's module (-r) initialises sentry-sdk with RfetchIntegration itself;
    # rfetch worker then installs the middleware without --sentry-dsn.
    sent = tmp_path / "sentry.jsonl"
    worker = WorkerProcess(redis_server.url, ["-r", "sentry_jobs", "--cpu-affinity", "none"],
                           env={**FAST_ENV, "RFETCH_TEST_SENTRY_FILE": str(sent)},
                           log_dir=tmp_path)
    try:
        start_sentry(cfg, transport, traces_sample_rate=1.0)
        client = Client(cfg, r)
        with sentry_sdk.start_transaction(name="POST /orders", op="http.server") as request:
            jid = client.push("sentry_jobs.TracedJob", [])

        def sent_items() -> list[dict[str, Any]]:
            if not sent.exists():
                return []
            return [json.loads(line) for line in sent.read_text().splitlines()]

        def transaction() -> dict[str, Any] | None:
            found = [i["payload"] for i in sent_items() if i["type"] == "transaction"]
            return found[0] if found else None

        wait_for(lambda: transaction() is not None, 30,
                 lambda: f"the job's transaction:\n{worker.log()}")
    finally:
        worker.stop()
    job = transaction()
    assert job is not None
    assert job["transaction"] == "rfetch/sentry_jobs.TracedJob"
    assert trace_of(job)["data"]["messaging.message.id"] == jid
    assert trace_of(job)["trace_id"] == request.trace_id
    [message] = [i["payload"] for i in sent_items() if i["type"] == "event"]
    assert trace_of(message)["trace_id"] == request.trace_id


# -- Crons ------------------------------------------------------------------------------------


def push_tick(parts: Worker, r: redis.Redis, schedule: Schedule) -> str:
    """Push one tick of ``schedule`` as the leader does: built by PeriodicJobBuilder (the
    client's rules and middleware), then put on its queue."""
    tick = int(time.time())
    built = PeriodicJobBuilder(parts.config, parts.client, r)(schedule, tick)
    assert built is not None
    r.lpush(f"queue:{built.queue}", built.payload)
    return built.jid


def test_a_periodic_job_checks_in_to_a_monitor_of_its_schedule(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport)
    schedule = cfg.periodic.register("*/5 * * * *", Ok, tz="Europe/Berlin", name="Ok.Every_5min!")

    push_tick(parts, r, schedule)
    parts.work_one()

    [started, ended] = transport.check_ins()
    config = {"schedule": {"type": "crontab", "value": "*/5 * * * *"},
              "timezone": "Europe/Berlin"}
    assert (started["monitor_slug"], started["status"]) == ("ok-every_5min", "in_progress")
    assert (ended["monitor_slug"], ended["status"]) == ("ok-every_5min", "ok")
    assert started["monitor_config"] == ended["monitor_config"] == config
    assert ended["check_in_id"] == started["check_in_id"]
    assert ended["duration"] >= 0


def test_a_failed_periodic_run_checks_in_error_and_its_retry_does_not_check_in(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport, traces_sample_rate=1.0)
    schedule = cfg.periodic.register("@hourly", Fails)

    push_tick(parts, r, schedule)
    parts.work_one()
    r.zadd("retry", {member: 1.0 for member in r.zrange("retry", 0, -1)}, xx=True)
    assert parts.poller.enqueue_due() == 1
    parts.work_one()

    [started, ended] = transport.check_ins()
    assert [started["status"], ended["status"]] == ["in_progress", "error"]
    assert ended["monitor_config"]["schedule"] == {"type": "crontab", "value": "0 * * * *"}
    assert ended["monitor_config"]["timezone"] == "UTC"
    # Each tick starts a trace of its own (not the leader thread's).
    [first, again] = transport.transactions()
    assert trace_of(first)["trace_id"] == trace_of(again)["trace_id"]
    push_tick(parts, r, schedule)
    parts.work_one()
    assert trace_of(transport.transactions()[2])["trace_id"] != trace_of(first)["trace_id"]


def test_crons_can_be_turned_off_and_transactions_still_sent(
    cfg: Config, parts: Worker, transport: RecordingTransport, r: redis.Redis
) -> None:
    start_sentry(cfg, transport, traces_sample_rate=1.0, crons=False)
    schedule = cfg.periodic.register("* * * * *", Ok)

    push_tick(parts, r, schedule)
    parts.work_one()

    assert transport.check_ins() == []
    [transaction] = transport.transactions()
    assert transaction["transaction"] == f"rfetch/{Ok.job_name()}"


# -- the CLI ----------------------------------------------------------------------------------


class FakeLauncher:
    """Stands in for Launcher: keeps the Config the CLI configured."""

    configs: list[Config] = []

    def __init__(self, config: Config, registry: Registry, **parts: object) -> None:
        FakeLauncher.configs.append(config)

    def run(self) -> int:
        return 0


def test_the_worker_command_passes_the_sentry_options_to_install(
    redis_server: RedisServer, transport: RecordingTransport, monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str | None, dict[str, Any]]] = []

    def install(config: Config, dsn: str | None = None, **options: Any) -> bool:
        calls.append((dsn, options))
        return False

    monkeypatch.setattr("rfetch.integrations.sentry.install", install)
    monkeypatch.setattr("rfetch.cli.worker_launch.Launcher", FakeLauncher)
    monkeypatch.setattr(Registry, "from_loaded", classmethod(lambda cls: cls([Ok])))
    monkeypatch.setattr("rfetch.cli.worker.setup_logging", lambda *a: _Listener())
    monkeypatch.setattr("rfetch.cli.worker.setup_direct_logging", lambda *a: None)

    result = CliRunner().invoke(main, [
        "worker", "--redis-url", redis_server.url, "--cpu-affinity", "none",
        "--sentry-dsn", DSN, "--sentry-traces-sample-rate", "0.25", "--no-sentry-crons",
    ])

    assert result.exit_code == 0, result.output
    assert calls == [(DSN, {"traces_sample_rate": 0.25, "crons": False})]


class _Listener:
    def stop(self) -> None:
        pass
