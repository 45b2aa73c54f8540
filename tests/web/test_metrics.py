"""Prometheus metrics: the web app's /metrics (read through the API on each scrape) and a
worker's own --metrics-port server."""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterable
from pathlib import Path

import pytest
import redis
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.config import Config
from rfetch.observability.metrics import ApiCollector, WorkerMetrics
from rfetch.observability.process_metrics import WorkerFigures
from rfetch.observability.stats import BUCKETS_MS, Stats
from rfetch.push.client import Client as JobClient
from rfetch.store.keys import Keys
from rfetch.worker.capacity import Busy, Capacity
from tests.support.redis_server import RedisServer, free_port
from tests.support.seed import jid_of
from tests.support.wait import wait_for
from tests.support.web import add_process, failed, payload, text
from tests.support.workers import WorkerProcess

FAST_ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.3",
    "RFETCH_POLL_INTERVAL_AVERAGE": "0.2",
    "RFETCH_POLL_INITIAL_WAIT": "0",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
}


def samples(exposition: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(exposition):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def test_metrics_endpoint(client: Client, r: redis.Redis) -> None:
    now = time.time()
    r.mset({"stat:processed": 1000, "stat:failed": 10})
    r.sadd("queues", "default", "mail")
    r.sadd("paused", "mail")
    r.lpush("queue:default", *[payload(jid_of(i), enqueued_at=now - 42) for i in range(3)])
    r.zadd("retry", {failed(jid_of(10)): now, failed(jid_of(11)): now})
    r.zadd("dead", {failed(jid_of(12)): now})
    r.zadd("schedule", {payload(jid_of(13)): now + 60})
    add_process(r, busy=2)
    add_process(r, "b:2:bbbbbbbbbbbb", busy=1, quiet=True)
    minute = time.strftime("%Y%m%d%H%M", time.gmtime())
    mail_fields = {
        "app.Mail|p": 20, "app.Mail|f": 3, "app.Mail|b0": 10, "app.Mail|b9": 9,
        f"app.Mail|b{len(BUCKETS_MS)}": 1,
    }
    r.hset(f"rfetch:metrics:{minute}", mapping=mail_fields)
    r.hset("rfetch:metrics:totals", mapping=mail_fields)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.content_type.startswith("text/plain")
    got = samples(text(response))
    assert got[("rfetch_processed_total", ())] == 1000
    assert got[("rfetch_failed_total", ())] == 10
    assert got[("rfetch_enqueued_jobs", ())] == 3
    assert got[("rfetch_queue_jobs", (("queue", "default"),))] == 3
    assert got[("rfetch_queue_jobs", (("queue", "mail"),))] == 0
    latency = got[("rfetch_queue_latency_seconds", (("queue", "default"),))]
    assert 41 <= latency <= 42 + (time.time() - now) + 1
    assert got[("rfetch_queue_paused", (("queue", "mail"),))] == 1
    assert got[("rfetch_queue_paused", (("queue", "default"),))] == 0
    assert got[("rfetch_retry_jobs", ())] == 2
    assert got[("rfetch_dead_jobs", ())] == 1
    assert got[("rfetch_scheduled_jobs", ())] == 1
    assert got[("rfetch_processes", ())] == 2
    assert got[("rfetch_busy_threads", ())] == 3
    assert got[("rfetch_concurrency_threads", ())] == 10
    assert got[("rfetch_quiet_processes", ())] == 1
    mail = (("class", "app.Mail"),)
    assert got[("rfetch_class_processed_total", mail)] == 20
    assert got[("rfetch_class_failed_total", mail)] == 3
    bucket = "rfetch_class_duration_seconds_bucket"
    assert got[(bucket, (("class", "app.Mail"), ("le", "0.001")))] == 10
    assert got[(bucket, (("class", "app.Mail"), ("le", "1")))] == 19
    assert got[(bucket, (("class", "app.Mail"), ("le", "60")))] == 19
    assert got[(bucket, (("class", "app.Mail"), ("le", "3600")))] == 19
    assert got[(bucket, (("class", "app.Mail"), ("le", "+Inf")))] == 20
    assert got[("rfetch_class_duration_seconds_count", mail)] == 20
    quantile = "rfetch_class_duration_window_seconds"
    assert got[(quantile, (("class", "app.Mail"), ("quantile", "0.5")))] == 0.001
    assert got[(quantile, (("class", "app.Mail"), ("quantile", "0.95")))] == 1.0
    assert got[(quantile, (("class", "app.Mail"), ("quantile", "0.99")))] == float("inf")
    assert got[(f"{quantile}_count", mail)] == 20
    assert got[("rfetch_metrics_window_seconds", ())] == 300
    # The names docs/web.md listed before the units were added are still there, deprecated.
    assert got[("rfetch_enqueued", ())] == 3 and got[("rfetch_dead_size", ())] == 1
    assert got[("rfetch_queue_size", (("queue", "default"),))] == 3
    old_quantile = "rfetch_class_duration_quantile_seconds"
    assert got[(old_quantile, (("class", "app.Mail"), ("quantile", "0.5")))] == 0.001
    families = {f.name: f for f in text_string_to_metric_families(text(response))}
    assert families["rfetch_class_duration_window_seconds"].type == "summary"
    assert_naming_conventions(families.values())


# Gauges whose value is a flag (1/0) or whose unit depends on the labels (a limiter's kind).
UNITLESS_GAUGES = {"rfetch_queue_paused", "rfetch_leader_present", "rfetch_worker_quiet",
                   "rfetch_limiter_limit", "rfetch_limiter_in_use"}
UNITS = ("_seconds", "_bytes", "_jobs", "_threads", "_slots", "_processes", "_cpus",
         "_items", "_executions")


def assert_naming_conventions(families: Iterable[Metric]) -> None:
    """Prometheus' naming practice: a gauge names its unit; percentiles are a summary's
    quantiles, not a gauge's label. Deprecated names (help "Deprecated: ...") excepted."""
    wrong = []
    for family in families:
        if family.documentation.startswith("Deprecated") or family.type != "gauge":
            continue
        if family.name.endswith("_created"):  # prometheus-client's counter timestamps
            continue
        if family.name not in UNITLESS_GAUGES and not family.name.endswith(UNITS):
            wrong.append(f"{family.name}: a gauge without a unit")
        if any("quantile" in s.labels for s in family.samples):
            wrong.append(f"{family.name}: a gauge with a quantile label")
    assert not wrong


def flush(stats: Stats, r: redis.Redis) -> None:
    pipe = r.pipeline()
    stats.queue_flush(pipe, stats.take())
    pipe.execute()


def test_class_figures_are_counters_that_outlive_the_window(client: Client,
                                                            r: redis.Redis) -> None:
    """rate() needs counters that only grow: the per-class figures keep counting when the
    minute hashes behind the window expire, and add up across flushes."""
    stats = Stats(Keys())
    for _ in range(3):
        stats.record("app.Mail", False, 4.0)
    stats.record("app.Mail", True, 4.0)
    flush(stats, r)
    mail = (("class", "app.Mail"),)
    got = samples(text(client.get("/metrics")))
    assert got[("rfetch_class_processed_total", mail)] == 4
    assert got[("rfetch_class_failed_total", mail)] == 1
    for key in r.keys("rfetch:metrics:2*"):  # the window's minutes expire...
        r.delete(key)
    stats.record("app.Mail", False, 4.0)
    flush(stats, r)
    got = samples(text(client.get("/metrics")))
    assert got[("rfetch_class_processed_total", mail)] == 5  # ...the counter goes on
    assert got[("rfetch_class_failed_total", mail)] == 1
    assert got[("rfetch_class_duration_seconds_count", mail)] == 5
    families = {f.name: f.type for f in text_string_to_metric_families(
        text(client.get("/metrics")))}
    assert families["rfetch_class_processed"] == "counter"
    assert families["rfetch_class_duration_seconds"] == "histogram"


def test_jobs_over_a_minute_get_their_own_percentiles(client: Client, api: Api,
                                                      r: redis.Redis) -> None:
    """A 90 s job and a 20 min job are told apart (not all "> 60 s")."""
    stats = Stats(Keys())
    for _ in range(10):
        stats.record("app.Report", False, 90_000.0)
    for _ in range(10):
        stats.record("app.Export", False, 20 * 60_000.0)
    flush(stats, r)
    by_class = {m.job_class: m for m in api.class_metrics(5)}
    assert by_class["app.Report"].p50_ms == 120_000
    assert by_class["app.Export"].p99_ms == 1_800_000
    quantile = "rfetch_class_duration_window_seconds"
    got = samples(text(client.get("/metrics")))
    assert got[(quantile, (("class", "app.Report"), ("quantile", "0.5")))] == 120
    assert got[(quantile, (("class", "app.Export"), ("quantile", "0.99")))] == 1800
    page = text(client.get("/classes?minutes=5"))
    assert "≤ 2 min" in page and "≤ 30 min" in page
    assert "&gt; 60 s" not in page


def test_collector_window_is_bounded(api: Api) -> None:
    with pytest.raises(ValueError):
        ApiCollector(api, window_minutes=0)
    assert [m.name for m in ApiCollector(api).describe()] == []


def test_worker_metrics_middleware_counts_and_times() -> None:
    metrics = WorkerMetrics()
    metrics.watch(lambda: WorkerFigures(Busy(3, 140), Capacity(5, 200), True))

    def ok() -> None:
        time.sleep(0.002)

    def boom() -> None:
        raise ValueError("x")

    job = {"class": "app.Mail", "jid": jid_of(1)}
    metrics.middleware(None, job, "mail", ok)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        metrics.middleware(None, job, "mail", boom)  # type: ignore[arg-type]
    from prometheus_client import generate_latest

    got = samples(generate_latest(metrics.registry).decode())
    labels = (("class", "app.Mail"), ("queue", "mail"))
    assert got[("rfetch_worker_jobs_processed_total", labels)] == 2
    assert got[("rfetch_worker_jobs_failed_total", labels)] == 1
    assert got[("rfetch_worker_job_duration_seconds_count", labels)] == 2
    bucket = tuple(sorted((*labels, ("le", "0.001"))))
    assert got[("rfetch_worker_job_duration_seconds_bucket", bucket)] <= 1
    assert got[("rfetch_worker_busy_threads", ())] == 3
    assert got[("rfetch_worker_concurrency_threads", ())] == 5
    assert got[("rfetch_worker_busy_async_slots", ())] == 140
    assert got[("rfetch_worker_concurrency_async_slots", ())] == 200
    assert got[("rfetch_worker_quiet", ())] == 1
    assert got[("rfetch_worker_cpus", ())] == len(os.sched_getaffinity(0))
    assert got[("rfetch_worker_concurrency", ())] == 5  # the deprecated name
    assert_naming_conventions(
        text_string_to_metric_families(generate_latest(metrics.registry).decode())
    )


def test_worker_metrics_count_jobs_stopped_by_time_limits_and_cancels() -> None:
    import rfetch

    metrics = WorkerMetrics()
    job = {"class": "app.Mail", "jid": jid_of(1)}
    metrics.error_handler(rfetch.JobTimeout("late"), {"job": job, "queue": "mail"})
    metrics.error_handler(rfetch.JobTimeout("late"), {"job": job, "queue": "mail", "hard": True})
    metrics.error_handler(rfetch.JobCancelled("x"), {"job": job, "queue": "mail", "hard": True})
    metrics.error_handler(ValueError("other"), {"job": job, "queue": "mail"})
    metrics.error_handler(rfetch.JobTimeout("no job"), {"context": "internal"})
    from prometheus_client import generate_latest

    got = samples(generate_latest(metrics.registry).decode())

    def stopped(reason: str, path: str, cls: str = "app.Mail", queue: str = "mail") -> float:
        labels = (("class", cls), ("path", path), ("queue", queue), ("reason", reason))
        return got.get(("rfetch_worker_jobs_stopped_total", labels), 0)

    assert stopped("timeout", "cooperative") == 1
    assert stopped("timeout", "hard") == 1
    assert stopped("cancel", "hard") == 1
    assert stopped("timeout", "cooperative", "?", "?") == 1


def test_worker_serves_its_metrics(redis_server: RedisServer, r: redis.Redis,
                                   tmp_path: Path) -> None:
    port = free_port()
    worker = WorkerProcess(redis_server.url,
                           ["-r", "testjobs", "-q", "default", "-c", "2",
                            "--metrics-port", str(port)],
                           env=FAST_ENV, log_dir=tmp_path)
    try:
        worker.identity(r)
        client = JobClient(Config(redis_url=redis_server.url))
        for i in range(5):
            client.push("testjobs.Noop", [i])
        client.push("testjobs.AlwaysFails", [], {"retry": False})

        def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
            url = f"http://127.0.0.1:{port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as answer:
                return samples(answer.read().decode())

        def all_counted() -> bool:
            got = scraped()
            return got.get(("rfetch_worker_jobs_processed_total",
                            (("class", "testjobs.Noop"), ("queue", "default")))) == 5 and (
                got.get(("rfetch_worker_jobs_failed_total",
                         (("class", "testjobs.AlwaysFails"), ("queue", "default")))) == 1)

        wait_for(all_counted, 20, "the worker's metrics to count 6 jobs")
        got = scraped()
        assert got[("rfetch_worker_concurrency", ())] == 2
        assert got[("rfetch_worker_quiet", ())] == 0
        assert got[("rfetch_worker_job_duration_seconds_count",
                    (("class", "testjobs.Noop"), ("queue", "default")))] == 5
    finally:
        worker.kill()


def test_workflow_metrics(client: Client, r: redis.Redis) -> None:
    r.set("rfetch:results-stored", 7)
    r.set("rfetch:deps-cancelled", 2)
    r.hset("rfetch:waiting", mapping={jid_of(1): "{}", jid_of(2): "{}", jid_of(3): "{}"})
    found = samples(text(client.get("/metrics")))
    assert found[("rfetch_results_stored_total", ())] == 7
    assert found[("rfetch_dependency_cancelled_total", ())] == 2
    assert found[("rfetch_waiting_jobs", ())] == 3
