"""Prometheus families of running iterable jobs (docs/durable-jobs.md), read on each scrape
by :class:`rfetch.observability.metrics.ApiCollector`:

- ``rfetch_iterable_done_items`` (gauge, labels ``class`` and ``jid``): items a running
  iterable job has done over every execution, as of its last checkpoint (``it-<jid>``'s
  ``n``);
- ``rfetch_iterable_executions`` (gauge, same labels): its executions (``ex``).

Only running jobs appear (at most the live processes' threads), so the ``jid`` label stays
bounded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric

if TYPE_CHECKING:
    from rfetch.api import Api
    from rfetch.api.processes import ProcessInfo


def durable_metrics(api: Api, processes: Sequence[ProcessInfo]) -> Iterator[Metric]:
    """The families above: one pipelined HMGET per running job (none when idle)."""
    labels = ["class", "jid"]
    done = GaugeMetricFamily("rfetch_iterable_done_items",
                             "Items a running iterable job has done, at its last checkpoint.",
                             labels=labels)
    executions = GaugeMetricFamily("rfetch_iterable_executions",
                                   "Executions of a running iterable job so far.", labels=labels)
    running = [j.job for p in processes for j in p.running if j.job.jid]
    if running:
        pipe = api.redis.pipeline(transaction=False)
        for job in running:
            pipe.hmget(api.keys.iteration(job.jid or ""), ["n", "ex"])
        for job, (n, ex) in zip(running, pipe.execute(), strict=True):
            if n is not None:
                done.add_metric([job.job_class, job.jid or ""], float(n))
            if ex is not None:
                executions.add_metric([job.job_class, job.jid or ""], float(ex))
    yield done
    yield executions
