"""A job over a limiter's limit is rescheduled, not failed (Sidekiq Enterprise's limiter
middleware): scheduled set with ``overrated`` counted, ``retry_count`` and the failed count
unchanged, the limiter's backoff used, and a normal failure after the maximum. Driven one
job at a time in-process (``tests/support/gate_worker.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import rfetch
from rfetch.config import Config
from tests.support.gate_worker import Worker, make_due, running

LIMITERS: dict[str, rfetch.Limiter] = {}
"""The limiter the job below calls, built by each test on its Redis."""


class CallsApi(rfetch.Job):
    """Calls a full limiter: always over the limit."""

    queue = "q"
    retry = 3

    def perform(self, *args: Any) -> None:
        with LIMITERS["api"].within_limit():
            pass


@pytest.fixture
def worker(cfg: Config) -> Iterator[Worker]:
    with running(cfg, [CallsApi]) as w:
        yield w


def _full_limiter(cfg: Config, **options: Any) -> rfetch.Limiter:
    limiter = rfetch.Limiter.window(
        "api", 1, per="day", wait_timeout=0, client=rfetch.Client(cfg), **options
    )
    with limiter.within_limit():  # the window's one call is spent
        pass
    LIMITERS["api"] = limiter
    return limiter


def _scheduled(r: redis.Redis) -> tuple[dict[str, Any], float]:
    [(raw, score)] = r.zrange("schedule", 0, -1, withscores=True)
    return json.loads(raw), score


def test_over_limit_reschedules_without_failure(
    worker: Worker, cfg: Config, r: redis.Redis
) -> None:
    _full_limiter(cfg, backoff=lambda count, job: 100.0 * (count + 1))
    jid = worker.client.push(CallsApi.job_name(), [], {"queue": "q"})

    started = time.time()
    worker.work_one()

    job, score = _scheduled(r)
    assert job["jid"] == jid and job["overrated"] == 1
    assert "retry_count" not in job and "error_class" not in job
    assert score - started == pytest.approx(100, abs=2)
    assert r.zcard("retry") == 0 and r.zcard("dead") == 0
    assert worker.private_lengths() == 0
    snap = worker.stats.take()
    assert (snap.processed, snap.failed) == (1, 0)  # processed, not a failure
    assert r.hget("rfetch:limiter:api", "overlimit") == b"1"

    make_due(r, "schedule")
    worker.poller.enqueue_due()
    worker.work_one()
    job, score = _scheduled(r)
    assert job["overrated"] == 2 and "retry_count" not in job
    assert score - started == pytest.approx(200, abs=2)


def test_past_the_maximum_it_is_a_normal_failure(
    worker: Worker, cfg: Config, r: redis.Redis
) -> None:
    _full_limiter(cfg, reschedule=2, backoff=lambda count, job: 5.0)
    jid = worker.client.push(CallsApi.job_name(), [], {"queue": "q"})
    for _ in range(2):
        worker.work_one()
        assert _scheduled(r)[0]["overrated"] <= 2
        make_due(r, "schedule")
        worker.poller.enqueue_due()
    worker.work_one()

    assert r.zcard("schedule") == 0
    [raw] = r.zrange("retry", 0, -1)
    job = json.loads(raw)
    assert job["jid"] == jid and job["overrated"] == 2 and job["retry_count"] == 0
    assert job["error_class"] == "rfetch.errors.OverLimit"


def test_default_backoff_is_sidekiq_enterprise_s(
    worker: Worker, cfg: Config, r: redis.Redis
) -> None:
    _full_limiter(cfg)
    worker.client.push(CallsApi.job_name(), [], {"queue": "q"})
    started = time.time()
    worker.work_one()
    _, score = _scheduled(r)
    assert 1 <= score - started <= 301  # 300 * 0 + rand(300) + 1


def test_a_broken_backoff_falls_back_to_the_default(
    worker: Worker, cfg: Config, r: redis.Redis
) -> None:
    _full_limiter(cfg, backoff=lambda count, job: 1 / 0)
    worker.client.push(CallsApi.job_name(), [], {"queue": "q"})
    worker.work_one()
    job, _ = _scheduled(r)
    assert job["overrated"] == 1


def test_a_job_pushed_by_ruby_sidekiq_is_rescheduled_the_same_way(
    worker: Worker, cfg: Config, r: redis.Redis
) -> None:
    """A Sidekiq 8 payload (integer millisecond timestamps, no rfetch field): the limiter is
    a library, so the job needs no new field to be limited; it gets ``overrated`` like any."""
    _full_limiter(cfg, backoff=lambda count, job: 30.0)
    raw = json.dumps({"retry": True, "queue": "q", "class": CallsApi.job_name(), "args": [],
                      "jid": "0123456789abcdef01234567", "created_at": 1_763_950_000_000,
                      "enqueued_at": 1_763_950_000_000})
    r.sadd("queues", "q")
    r.lpush("queue:q", raw)
    worker.work_one()
    job, _ = _scheduled(r)
    assert job["overrated"] == 1 and job["created_at"] == 1_763_950_000_000
    assert {k: v for k, v in job.items() if k != "overrated"} == json.loads(raw)
