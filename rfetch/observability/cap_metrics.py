"""Prometheus families of fetch caps and expiring jobs (docs/flow-control.md), read through
``rfetch.api`` on each scrape by :class:`rfetch.observability.metrics.ApiCollector`.

- ``rfetch_concurrency_key_running`` / ``_waiting`` / ``_limit`` (gauges, labels ``queue``
  and ``key``): jobs of each concurrency key holding a slot, waiting unfetched, and the
  key's limit; a key appears while it has jobs of either kind.
- ``rfetch_expired`` (counter, ``rfetch_expired_total``): jobs dropped because they were not
  started within their ``expires_in`` (``stat:expired``); ``rfetch_queue_expired_total``
  (label ``queue``) the same per queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from rfetch.api import Api


def flow_metrics(api: Api) -> Iterator[Metric]:
    """The families above, from one read of the cap keys and one GET."""
    labels = ["queue", "key"]
    running = GaugeMetricFamily(
        "rfetch_concurrency_key_running_jobs",
        "Jobs of a concurrency key holding a slot (fetched, running or about to).", labels=labels)
    waiting = GaugeMetricFamily(
        "rfetch_concurrency_key_waiting_jobs",
        "Jobs of a concurrency key waiting in Redis, not fetched.", labels=labels)
    limit = GaugeMetricFamily(
        "rfetch_concurrency_key_limit_jobs", "A concurrency key's limit (the latest pushed).",
        labels=labels)
    for row in api.concurrency_keys():
        running.add_metric([row.queue, row.key], row.running)
        waiting.add_metric([row.queue, row.key], row.waiting)
        limit.add_metric([row.queue, row.key], row.limit)
    yield running
    yield waiting
    yield limit
    expired = CounterMetricFamily(
        "rfetch_expired", "Jobs dropped, not run, because they were not started within "
        "their expires_in (stat:expired).")
    expired.add_metric([], api.expired_count())
    yield expired
    by_queue = CounterMetricFamily(
        "rfetch_queue_expired", "Jobs of the queue dropped as expired (rfetch:expired).",
        labels=["queue"])
    for queue, count in sorted(api.expired_by_queue().items()):
        by_queue.add_metric([queue], count)
    yield by_queue
