"""``Config.error_handlers`` in a running worker, against a real redis-server.

A real ``Launcher`` is built in-process (so the processor, the manager and the launcher's
reporting are wired as in ``rfetch worker``) and its manager's threads are started; jobs are
pushed with the client and outcomes checked in Redis.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.errors import InvalidJob, UnknownJob
from tests.support.gate_worker import Launch, LaunchedWorker, broken_once
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

Seen = list[tuple[BaseException, dict[str, Any]]]
MakeWorker = Callable[[Config], LaunchedWorker]


class Raises(rfetch.Job):
    """Raises a fresh exception each run and keeps it, for identity checks."""

    retry = 3
    raised: list[BaseException] = []

    def perform(self, *args: Any) -> None:
        exc = LookupError(f"raised by {list(args)}")
        Raises.raised.append(exc)
        raise exc


class Ok(rfetch.Job):
    ran: list[str] = []

    def perform(self, *args: Any) -> None:
        Ok.ran.append(self.jid)


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    Raises.raised.clear()
    Ok.ran.clear()
    yield


@pytest.fixture
def cfg(redis_server: RedisServer, r: redis.Redis) -> Config:
    return Config(redis_url=redis_server.url, block_timeout=0.2, concurrency=2)


@pytest.fixture
def make_worker(launch: Launch) -> MakeWorker:
    return lambda config: launch(config, [Raises, Ok])


def recorder(seen: Seen) -> Any:
    lock = threading.Lock()

    def handler(exc: BaseException, context: dict[str, Any]) -> None:
        with lock:
            seen.append((exc, context))

    return handler


def retry_entries(r: redis.Redis) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in r.zrange("retry", 0, -1)]


def test_a_job_failure_gives_the_exception_and_the_job(
    cfg: Config, make_worker: MakeWorker, r: redis.Redis
) -> None:
    seen: Seen = []
    worker = make_worker(cfg.replace(error_handlers=[recorder(seen)]))
    jid = worker.client.push(Raises.job_name(), [1, "two"])

    worker.start()
    wait_for(lambda: r.zcard("retry") == 1, 10, "the job in the retry set")

    [(exc, context)] = seen
    [raised] = Raises.raised
    assert exc is raised
    assert context["jid"] == jid
    assert context["queue"] == "default"
    assert context["job"]["jid"] == jid
    assert context["job"]["class"] == Raises.job_name()
    assert context["job"]["args"] == [1, "two"]


def test_an_unknown_job_class_is_reported_as_a_failure(
    cfg: Config, make_worker: MakeWorker, r: redis.Redis
) -> None:
    seen: Seen = []
    worker = make_worker(cfg.replace(error_handlers=[recorder(seen)]))
    jid = worker.client.push("Nowhere.Defined", [])

    worker.start()
    wait_for(lambda: r.zcard("retry") == 1, 10, "the job in the retry set")

    [(exc, context)] = seen
    assert isinstance(exc, UnknownJob)
    assert context["jid"] == jid
    assert context["job"]["class"] == "Nowhere.Defined"


def test_an_invalid_job_gives_the_queue_and_context(
    cfg: Config, make_worker: MakeWorker, r: redis.Redis
) -> None:
    seen: Seen = []
    worker = make_worker(cfg.replace(error_handlers=[recorder(seen)]))
    r.lpush("queue:default", b'{"class": "X", "args": "not a list"}')

    worker.start()
    wait_for(lambda: r.zcard("dead") == 1, 10, "the invalid job in the dead set")

    [(exc, context)] = seen
    assert isinstance(exc, InvalidJob)
    assert context == {"queue": "default", "context": "invalid job"}


def test_an_internal_error_gives_its_context(
    cfg: Config, make_worker: MakeWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: Seen = []
    worker = make_worker(cfg.replace(error_handlers=[recorder(seen)]))
    fetch = worker.launcher.fetch
    broken = RuntimeError("a bug in fetch")
    monkeypatch.setattr(fetch, "retrieve_work", broken_once(fetch.retrieve_work, broken))
    jid = worker.client.push(Ok.job_name(), [])

    worker.start()
    wait_for(lambda: jid in Ok.ran, 10, "the job to run after the fetch error")

    assert seen == [(broken, {"context": "fetch"})]


def test_a_raising_error_handler_neither_stops_the_worker_nor_loses_the_job(
    cfg: Config, make_worker: MakeWorker, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: Seen = []

    def broken_handler(exc: BaseException, context: dict[str, Any]) -> None:
        raise RuntimeError("the error handler is broken")

    worker = make_worker(cfg.replace(error_handlers=[broken_handler, recorder(seen)]))
    fetch = worker.launcher.fetch
    broken = broken_once(fetch.retrieve_work, RuntimeError("a bug in fetch"))
    monkeypatch.setattr(fetch, "retrieve_work", broken)
    failing = worker.client.push(Raises.job_name(), ["first"])
    ok = worker.client.push(Ok.job_name(), [])

    worker.start()
    wait_for(lambda: r.zcard("retry") == 1 and ok in Ok.ran, 10, "both jobs to finish")
    # The worker goes on after the handler raised: a later failure is handled the same way.
    later = worker.client.push(Raises.job_name(), ["second"])
    wait_for(lambda: r.zcard("retry") == 2, 10, "the later job in the retry set")

    entries = {job["jid"]: job for job in retry_entries(r)}
    assert set(entries) == {failing, later}
    assert all(job["retry_count"] == 0 for job in entries.values())
    assert all(job["error_class"] == "LookupError" for job in entries.values())
    wait_for(lambda: worker.private_lengths() == 0, 10, "every job acknowledged")
    # The handler after the broken one still ran, for every error.
    assert [c.get("jid", c.get("context")) for _, c in seen] == ["fetch", failing, later]
