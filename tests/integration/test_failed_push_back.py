"""A push-back that fails leaves no job behind, against a real redis-server.

A job fetched ahead and waiting behind a long job is given back to its queue (adaptive
prefetch, :mod:`rfetch.worker.prefetch`): the manager takes it out of the jobs it holds and
pushes it back. When that push-back fails (the master was just SIGKILLed in a Sentinel
failover, or a demoted master answers READONLY), the job is still in the private list,
held by no thread, and the process's heartbeat keeps orphan recovery away from it: before
the fetcher swept the private lists after such a failure, the job stayed there as long as
the process lived (the Sentinel chaos test lost 4 jobs so, with ``min_replicas_acks``).

A real ``Launcher`` is built in-process, its manager's threads run, and the fetch's
``requeue`` fails once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

import rfetch
from rfetch.config import Config
from tests.support.gate_worker import Launch, broken_once
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for


class Long(rfetch.Job):
    """Runs until the test releases it."""

    release = threading.Event()

    def perform(self, *args: Any) -> None:
        Long.release.wait(30)


class Quick(rfetch.Job):
    ran: list[str] = []

    def perform(self, *args: Any) -> None:
        Quick.ran.append(self.jid)


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    Long.release.clear()
    Quick.ran.clear()
    yield
    Long.release.set()  # a failed test must not leave the thread waiting


def jids(r: redis.Redis, key: str) -> list[str]:
    return [json.loads(raw)["jid"] for raw in r.lrange(key, 0, -1)]


@pytest.mark.parametrize(
    "error",
    [
        RedisConnectionError("Error 111 connecting to 127.0.0.1. Connection refused."),
        ResponseError("READONLY You can't write against a read only replica."),
    ],
    ids=["connection refused", "READONLY"],
)
def test_a_job_given_back_whose_push_back_failed_is_swept_back_to_its_queue(
    redis_server: RedisServer, r: redis.Redis, launch: Launch,
    monkeypatch: pytest.MonkeyPatch, error: Exception,
) -> None:
    # One thread, one job fetched ahead: both jobs come in the first fetch; once the long
    # one has run past the 0.1 s horizon, the other is given back.
    config = Config(redis_url=redis_server.url, block_timeout=0.2, concurrency=1,
                    prefetch=1, prefetch_horizon=0.1)
    worker = launch(config, [Long, Quick])
    fetch = worker.launcher.fetch
    monkeypatch.setattr(fetch, "requeue", broken_once(fetch.requeue, error))
    long = worker.client.push(Long.job_name(), [])
    quick = worker.client.push(Quick.job_name(), [])
    private = fetch.private_key("default")

    worker.start()
    # The give-back failed; the fetcher's sweep pushes the job back while the long job
    # still holds the only thread (no room: nothing is fetched meanwhile).
    wait_for(lambda: jids(r, "queue:default") == [quick], 10,
             lambda: f"{quick} back in its queue; private list: {jids(r, private)}")
    assert jids(r, private) == [long]
    assert Quick.ran == []

    Long.release.set()
    wait_for(lambda: Quick.ran == [quick], 10, "the given-back job to run")
    wait_for(lambda: worker.private_lengths() == 0, 10, "every job acknowledged")
    fetcher = worker.launcher.manager._fetcher
    assert fetcher is not None and fetcher.is_alive()
