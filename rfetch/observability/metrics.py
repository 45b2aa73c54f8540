"""Prometheus metrics: a collector that reads the cluster through ``rfetch.api`` on each
scrape (the web UI's ``/metrics``), and per-process metrics a worker can serve with
``rfetch worker --metrics-port N``.

Needs ``prometheus-client`` (the ``web`` extra). Metric names are listed in ``docs/web.md``.

Cluster metrics (:class:`ApiCollector`) are read from Redis when scraped, so every web
process reports the same values and nothing is kept in memory. Worker metrics
(:class:`WorkerMetrics`) are true counters and a histogram of this process's executions, fed
by a server middleware; sum them over workers with ``sum by (class) (rate(...))``. The
cluster's per-class figures are counters too (``rfetch_class_processed_total``...), summed by
the workers' heartbeats in ``rfetch:metrics:totals``, so ``rate()`` and
``histogram_quantile()`` work on them as on any counter.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from rfetch.api.batches import batch_counters
from rfetch.errors import JobCancelled, JobTimeout
from rfetch.observability.cap_metrics import flow_metrics
from rfetch.observability.durable_metrics import durable_metrics
from rfetch.observability.metric_names import window_summary, with_deprecated
from rfetch.observability.process_metrics import WorkerFigures, WorkerStateCollector, process_gauges
from rfetch.observability.stats import BUCKETS_MS

if TYPE_CHECKING:
    from rfetch.api import Api, ClassMetrics
    from rfetch.jobs.job import Job

DURATION_BUCKETS = tuple(ms / 1000 for ms in BUCKETS_MS)
"""Upper bounds, seconds, of the run-time histograms: the workers' per-minute buckets."""

DEFAULT_WINDOW_MINUTES = 5
"""Minutes of the per-class run-time percentiles (``api.class_metrics``) a scrape reports."""


def _le(bound_ms: float) -> str:
    return f"{bound_ms / 1000:g}"


class ApiCollector(Collector):
    """Reads queue, set, process and per-class figures through the API on each scrape.

    Args:
        api: the admin API.
        window_minutes: minutes of the per-class run-time percentiles reported (1-120).
    """

    def __init__(self, api: Api, window_minutes: int = DEFAULT_WINDOW_MINUTES) -> None:
        if not 1 <= window_minutes <= 120:
            raise ValueError("window_minutes must be between 1 and 120")
        self.api = api
        self.window_minutes = window_minutes

    def describe(self) -> list[Metric]:
        # No round trip at registration time (prometheus-client calls collect() otherwise).
        return []

    def collect(self) -> Iterator[Metric]:
        """One scrape: about a dozen round trips, whatever the size of the queues and sets;
        each renamed metric also under its deprecated name
        (:mod:`rfetch.observability.metric_names`)."""
        return with_deprecated(self._families())

    def _families(self) -> Iterator[Metric]:
        started = time.perf_counter()
        api = self.api
        stats = api.stats()
        queues = api.queues()
        processes = api.processes.all()
        classes = api.class_metrics(self.window_minutes)
        totals = api.class_totals()

        processed = CounterMetricFamily(
            "rfetch_processed", "Jobs executed since the counters were created (stat:processed)."
        )
        processed.add_metric([], stats.processed)
        yield processed
        failed = CounterMetricFamily(
            "rfetch_failed", "Executions that raised (stat:failed); they count as processed too."
        )
        failed.add_metric([], stats.failed)
        yield failed

        yield _gauge("rfetch_enqueued_jobs", "Jobs waiting in all queues.", stats.enqueued)
        yield _gauge("rfetch_scheduled_jobs", "Jobs in the scheduled set.", stats.scheduled_size)
        yield _gauge("rfetch_retry_jobs", "Jobs in the retry set.", stats.retry_size)
        yield _gauge("rfetch_dead_jobs", "Jobs in the dead set.", stats.dead_size)
        yield from process_gauges(processes)

        size = GaugeMetricFamily("rfetch_queue_jobs", "Jobs waiting in the queue.",
                                 labels=["queue"])
        latency = GaugeMetricFamily(
            "rfetch_queue_latency_seconds",
            "Seconds the oldest job of the queue has waited (now minus its enqueued_at).",
            labels=["queue"],
        )
        paused = GaugeMetricFamily("rfetch_queue_paused", "1 when the queue is paused.",
                                   labels=["queue"])
        for q in queues:
            size.add_metric([q.name], q.size)
            latency.add_metric([q.name], q.latency)
            paused.add_metric([q.name], 1 if q.paused else 0)
        yield from (size, latency, paused)

        yield from _class_counters(totals)
        yield from _periodic_metrics(api)
        yield from _workflow_metrics(api)
        yield from _batch_metrics(api)
        yield from _limiter_metrics(api)
        yield from flow_metrics(api)
        yield from durable_metrics(api, processes)
        yield from window_summary(classes, self.window_minutes)
        yield _gauge("rfetch_metrics_window_seconds",
                     "Width of the window of rfetch_class_duration_window_seconds.",
                     self.window_minutes * 60)
        yield _gauge("rfetch_scrape_duration_seconds",
                     "Time this scrape took to read Redis.", time.perf_counter() - started)


def _class_counters(totals: list[ClassMetrics]) -> Iterator[Metric]:
    """Per-class counters since the workers first flushed them: executions, failures and
    the run-time histogram (``_bucket`` and ``_count``; no ``_sum``: the workers keep
    bucket counts only)."""
    processed = CounterMetricFamily(
        "rfetch_class_processed", "Executions per job class (failed ones included).",
        labels=["class"],
    )
    failed = CounterMetricFamily(
        "rfetch_class_failed", "Failed executions per job class.", labels=["class"]
    )
    duration = HistogramMetricFamily(
        "rfetch_class_duration_seconds", "Run time per job class, seconds.", labels=["class"]
    )
    for m in totals:
        processed.add_metric([m.job_class], m.processed)
        failed.add_metric([m.job_class], m.failed)
        buckets: list[tuple[str, float]] = []
        seen = 0
        for i, count in enumerate(m.buckets):
            seen += count
            buckets.append((_le(BUCKETS_MS[i]) if i < len(BUCKETS_MS) else "+Inf", seen))
        duration.add_metric([m.job_class], buckets, sum_value=None)
        # add_metric writes _count only with a _sum; the count is known, so give it.
        duration.samples.append(
            Sample("rfetch_class_duration_seconds_count", {"class": m.job_class}, seen)
        )
    yield processed
    yield failed
    yield duration


def _limiter_metrics(api: Api) -> Iterator[Metric]:
    """Per limiter (``rfetch.Limiter``, label ``limiter``; kind in ``rfetch_limiter_limit``):
    grants, grants that waited and their total wait, calls over the limit, reclaimed locks,
    the limit and the current use. Counters restart when a limiter's hash expires or is
    reset."""
    label = ["limiter"]
    counters = {
        "calls": CounterMetricFamily("rfetch_limiter_calls", "Calls granted per limiter.",
                                     labels=label),
        "waited": CounterMetricFamily(
            "rfetch_limiter_waits", "Granted calls that waited for capacity first.",
            labels=label),
        "wait_seconds": CounterMetricFamily(
            "rfetch_limiter_wait_seconds", "Seconds granted calls waited, in total.",
            labels=label),
        "overlimit": CounterMetricFamily(
            "rfetch_limiter_overlimit",
            "Calls that found no capacity within wait_timeout (rfetch.OverLimit raised).",
            labels=label),
        "reclaimed": CounterMetricFamily(
            "rfetch_limiter_reclaimed",
            "Concurrent locks taken back from holders that stopped renewing them.",
            labels=label),
    }
    limit = GaugeMetricFamily("rfetch_limiter_limit", "A limiter's limit (per its period).",
                              labels=["limiter", "kind"])
    in_use = GaugeMetricFamily(
        "rfetch_limiter_in_use",
        "Current use: calls in the window, units in the bucket, or locks held.", labels=label)
    for info in api.limiters():
        for field, family in counters.items():
            family.add_metric([info.name], getattr(info, field))
        limit.add_metric([info.name, info.kind], info.limit)
        in_use.add_metric([info.name], info.in_use)
    yield from counters.values()
    yield limit
    yield in_use


def _periodic_metrics(api: Api) -> Iterator[Metric]:
    """Periodic ticks per schedule (pushed, caught up late, skipped as older than the
    catch-up window), leader elections and whether a leader holds the lease."""
    schedules = api.periodic()
    leader = api.leader()
    families = {
        "pushed": CounterMetricFamily(
            "rfetch_periodic_ticks_pushed", "Ticks pushed per periodic schedule.",
            labels=["schedule"]),
        "caught_up": CounterMetricFamily(
            "rfetch_periodic_ticks_caught_up",
            "Ticks pushed late, after a leaderless gap, per periodic schedule.",
            labels=["schedule"]),
        "skipped": CounterMetricFamily(
            "rfetch_periodic_ticks_skipped",
            "Ticks older than the catch-up window, never pushed, per periodic schedule.",
            labels=["schedule"]),
    }
    for s in schedules:
        families["pushed"].add_metric([s.name], s.pushed)
        families["caught_up"].add_metric([s.name], s.caught_up)
        families["skipped"].add_metric([s.name], s.skipped)
    yield from families.values()
    changes = CounterMetricFamily("rfetch_leader_changes", "Leader elections so far.")
    changes.add_metric([], leader.changes)
    yield changes
    yield _gauge("rfetch_leader_present",
                 "1 while a process holds the leader lease (renewed within leader_ttl).",
                 1 if leader.present else 0)


def _workflow_metrics(api: Api) -> Iterator[Metric]:
    """Results recorded (``store_result``), jobs waiting on another job (``after=``,
    chains) and waiting jobs cancelled."""
    counts = api.workflow_counts()
    stored = CounterMetricFamily(
        "rfetch_results_stored", "Outcomes of store_result jobs recorded (successes and deaths).")
    stored.add_metric([], counts.results_stored)
    yield stored
    cancelled = CounterMetricFamily(
        "rfetch_dependency_cancelled",
        "Waiting jobs dropped: their dependency died (on_dependency_death=cancel), or cancelled.")
    cancelled.add_metric([], counts.dependency_cancelled)
    yield cancelled
    yield _gauge("rfetch_waiting_jobs", "Jobs waiting on another job, outside every queue.",
                 counts.waiting)


def _batch_metrics(api: Api) -> Iterator[Metric]:
    """Batches created, completed, succeeded and died (counted by the Lua calls in which
    each event happened)."""
    for event, value in batch_counters(api.ctx).items():
        family = CounterMetricFamily(f"rfetch_batches_{event}", f"Batches {event}.")
        family.add_metric([], value)
        yield family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def api_registry(api: Api, window_minutes: int = DEFAULT_WINDOW_MINUTES) -> CollectorRegistry:
    """A registry holding only an :class:`ApiCollector` (what ``/metrics`` exposes)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ApiCollector(api, window_minutes))
    return registry


# -- worker side ------------------------------------------------------------------------


class WorkerMetrics:
    """Per-process metrics of one worker: executions and run time by class and queue,
    busy threads and loop slots, concurrency and quiet state.

    Install :meth:`middleware` in ``config.server_middleware`` before the worker starts,
    then :meth:`serve` (``rfetch worker --metrics-port`` does both).

    Args:
        registry: where the metrics are registered (default: a new one, so several workers
            in one test process do not clash).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=False)
        labels = ["class", "queue"]
        self.processed = Counter(
            "rfetch_worker_jobs_processed", "Jobs this process executed.", labels,
            registry=self.registry,
        )
        self.failed = Counter(
            "rfetch_worker_jobs_failed", "Executions of this process that raised.", labels,
            registry=self.registry,
        )
        self.stopped = Counter(
            "rfetch_worker_jobs_stopped",
            "Jobs of this process stopped by a time limit or a cancel, by how: reason "
            "timeout or cancel, path cooperative (the job raised) or hard (recorded by the "
            "timekeeper, the process then retires).",
            ["class", "queue", "reason", "path"], registry=self.registry,
        )
        self.duration = Histogram(
            "rfetch_worker_job_duration_seconds", "Run time of this process's jobs.", labels,
            buckets=DURATION_BUCKETS, registry=self.registry,
        )
        if hasattr(os, "sched_getaffinity"):  # Linux
            Gauge(
                "rfetch_worker_cpus",
                "CPUs this process may run on now: 1 while adaptive affinity keeps it on "
                "its CPU, every allowed one while spread (--cpu-affinity).",
                registry=self.registry,
            ).set_function(lambda: len(os.sched_getaffinity(0)))
        self._state: Callable[[], WorkerFigures] | None = None
        self._lock = threading.Lock()
        self.registry.register(WorkerStateCollector(self.state))

    def middleware(
        self, job: Job, payload: dict[str, Any], queue: str, call_next: Callable[[], None]
    ) -> None:
        """Server middleware: time the job and count it by class and queue."""
        labels = (str(payload.get("class") or "?"), queue)
        started = time.perf_counter()
        try:
            call_next()
        except BaseException:
            self.failed.labels(*labels).inc()
            raise
        finally:
            self.processed.labels(*labels).inc()
            self.duration.labels(*labels).observe(time.perf_counter() - started)

    def error_handler(self, exc: BaseException, context: dict[str, Any]) -> None:
        """Error handler (``config.error_handlers``): counts the jobs stopped by a time
        limit or a cancel, cooperatively (reported by the processor) or the hard way
        (reported by the timekeeper, whose context carries ``hard``)."""
        if not isinstance(exc, (JobTimeout, JobCancelled)):
            return
        job = context.get("job")
        name = str(job.get("class") or "?") if isinstance(job, dict) else "?"
        reason = "timeout" if isinstance(exc, JobTimeout) else "cancel"
        path = "hard" if context.get("hard") else "cooperative"
        self.stopped.labels(name, str(context.get("queue") or "?"), reason, path).inc()

    def watch(self, state: Callable[[], WorkerFigures]) -> None:
        """Report ``state()`` (busy threads and loop slots, their capacity, quiet) on each
        scrape: the ``rfetch_worker_busy_*``, ``rfetch_worker_concurrency_*`` and
        ``rfetch_worker_quiet`` gauges."""
        with self._lock:
            self._state = state

    def state(self) -> WorkerFigures | None:
        """What ``watch`` reports now, or None before it was called."""
        with self._lock:
            probe = self._state
        return probe() if probe is not None else None

    def serve(self, port: int, addr: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` from a daemon thread (prometheus-client's HTTP server);
        returns the server."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr, registry=self.registry)
        return server
