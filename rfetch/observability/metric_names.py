"""Metric names with their unit, the deprecated names they replace, and the per-class
run-time percentiles as a summary.

Prometheus' naming convention puts the unit in a gauge's name (``_seconds``, ``_bytes``, or
the thing counted: ``_jobs``, ``_threads``); a gauge with a ``quantile`` label is a summary
in disguise. The names rfetch exposed before that (listed in ``docs/web.md``, so dashboards
may use them) are still exposed, as copies whose help says ``Deprecated``, until a later
release removes them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import Metric, SummaryMetricFamily
from prometheus_client.samples import Sample

if TYPE_CHECKING:
    from rfetch.api import ClassMetrics

RENAMED = {
    "rfetch_enqueued_jobs": "rfetch_enqueued",
    "rfetch_scheduled_jobs": "rfetch_scheduled_size",
    "rfetch_retry_jobs": "rfetch_retry_size",
    "rfetch_dead_jobs": "rfetch_dead_size",
    "rfetch_concurrency_threads": "rfetch_concurrency",
    "rfetch_queue_jobs": "rfetch_queue_size",
    "rfetch_concurrency_key_running_jobs": "rfetch_concurrency_key_running",
    "rfetch_concurrency_key_waiting_jobs": "rfetch_concurrency_key_waiting",
    "rfetch_concurrency_key_limit_jobs": "rfetch_concurrency_key_limit",
    "rfetch_worker_concurrency_threads": "rfetch_worker_concurrency",
}
"""New name -> the deprecated name still exposed beside it."""

QUANTILE_GAUGE = "rfetch_class_duration_quantile_seconds"
"""Deprecated: the gauge (label ``quantile``) that ``rfetch_class_duration_window_seconds``
(a summary) replaces."""


def with_deprecated(metrics: Iterable[Metric]) -> Iterator[Metric]:
    """Each metric, followed by a copy under its deprecated name when it was renamed."""
    for metric in metrics:
        yield metric
        old = RENAMED.get(metric.name)
        if old is not None:
            yield _copy(metric, old, f"Deprecated: renamed {metric.name}.")


def _copy(metric: Metric, name: str, documentation: str) -> Metric:
    copy = Metric(name, documentation, metric.type)
    copy.samples = [s._replace(name=name + s.name[len(metric.name):]) for s in metric.samples]
    return copy


def window_summary(classes: Iterable[ClassMetrics], window_minutes: int) -> Iterator[Metric]:
    """``rfetch_class_duration_window_seconds``: per class, the run-time percentiles
    (quantiles 0.5, 0.95, 0.99: the upper bound, seconds, of the histogram bucket they fall
    in; ``+Inf`` above the last) and ``_count`` (executions) over the last
    ``window_minutes``; no ``_sum`` (the workers keep bucket counts only). Then the
    deprecated gauge of the same percentiles."""
    summary = SummaryMetricFamily(
        "rfetch_class_duration_window_seconds",
        f"Run-time percentiles per job class over the last {window_minutes} minute(s) "
        "(upper bound of the histogram bucket, seconds).",
        labels=["class"],
    )
    name = summary.name
    for m in classes:
        for quantile, value in (("0.5", m.p50_ms), ("0.95", m.p95_ms), ("0.99", m.p99_ms)):
            if value is not None:
                seconds = math.inf if math.isinf(value) else value / 1000
                summary.samples.append(
                    Sample(name, {"class": m.job_class, "quantile": quantile}, seconds)
                )
        summary.samples.append(Sample(f"{name}_count", {"class": m.job_class}, m.processed))
    yield summary
    gauge = Metric(QUANTILE_GAUGE, "Deprecated: see rfetch_class_duration_window_seconds.",
                   "gauge")
    gauge.samples = [
        Sample(QUANTILE_GAUGE, s.labels, s.value) for s in summary.samples if "quantile" in
        s.labels
    ]
    yield gauge
