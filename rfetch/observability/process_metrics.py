"""Prometheus gauges of worker processes' capacity and use, threads and event-loop slots
counted apart (:mod:`rfetch.worker.capacity`): a busy gauge never exceeds its concurrency gauge.

Cluster side (``/metrics``, summed over live processes): ``rfetch_busy_threads`` /
``rfetch_concurrency_threads`` and ``rfetch_busy_async_slots`` /
``rfetch_concurrency_async_slots``. Worker side (``rfetch worker --metrics-port``): the
same four as ``rfetch_worker_...`` for the one process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rfetch.observability.metric_names import with_deprecated
from rfetch.worker.capacity import Busy, Capacity

if TYPE_CHECKING:
    from rfetch.api import ProcessInfo


class WorkerFigures(NamedTuple):
    """What a worker's metrics report on each scrape.

    Attributes:
        busy: jobs running now, on threads and on loop slots.
        capacity: threads and loop slots.
        quiet: whether it has stopped fetching.
    """

    busy: Busy
    capacity: Capacity
    quiet: bool


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _use(prefix: str, scope: str, busy: Busy, capacity: Capacity) -> Iterator[Metric]:
    yield _gauge(f"{prefix}_busy_threads", f"Processor threads running a job, {scope}.",
                 busy.threads)
    yield _gauge(f"{prefix}_concurrency_threads", f"Processor threads, {scope}.",
                 capacity.threads)
    yield _gauge(f"{prefix}_busy_async_slots",
                 f"Event-loop slots running an async job, {scope}.", busy.async_slots)
    yield _gauge(f"{prefix}_concurrency_async_slots",
                 f"Event-loop slots for async jobs, {scope}.", capacity.async_slots)


def process_gauges(processes: list[ProcessInfo]) -> Iterator[Metric]:
    """Live processes, their threads and loop slots (busy and in all), and the quiet ones."""
    yield _gauge("rfetch_processes", "Worker processes with a live heartbeat.", len(processes))
    busy = Busy(sum(p.busy_threads for p in processes), sum(p.busy_async for p in processes))
    capacity = Capacity(sum(p.threads for p in processes),
                        sum(p.async_slots for p in processes))
    yield from _use("rfetch", "over live processes", busy, capacity)
    yield _gauge("rfetch_quiet_processes", "Live processes that are quiet (not fetching).",
                 sum(1 for p in processes if p.quiet))


class WorkerStateCollector(Collector):
    """The gauges of one worker process (busy and concurrency by kind, quiet), read from
    ``state()`` on each scrape (None: nothing reported yet).

    Args:
        state: returns the figures now, or None before the worker is watched.
    """

    def __init__(self, state: Callable[[], WorkerFigures | None]) -> None:
        self.state = state

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        return with_deprecated(self._families())

    def _families(self) -> Iterator[Metric]:
        figures = self.state()
        if figures is None:
            return
        yield from _use("rfetch_worker", "in this process", figures.busy, figures.capacity)
        yield _gauge("rfetch_worker_quiet", "1 when this process has stopped fetching.",
                     1 if figures.quiet else 0)
