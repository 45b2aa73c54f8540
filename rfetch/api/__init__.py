"""The read/admin API: what the CLI and the web UI use to see and steer jobs.

Everything is read from Sidekiq's data model (``docs/data-model.md``), so jobs pushed by Ruby
Sidekiq show up too. The worker never imports this package. ::

    from rfetch.api import Api, JobFilter

    api = Api(config)                       # or Api(redis=client, namespace="ns")
    api.stats().enqueued
    api.queue("mail").pause()
    page = api.retries.page(limit=25, job_filter=JobFilter(job_class="SendWelcome"))
    api.retries.retry(page.jobs)            # records, or jids
    api.explain("b4a5cbd2e8f1a3c7d9e0f1a2").summary

See ``docs/api.md``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from redis import Redis

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.store.connection import connect
from rfetch.workflow.record import Record

from .cancel import CancelResult, cancel
from .concurrency import ConcurrencyKey, concurrency_keys
from .context import Context, Found
from .explain import explain
from .groups import (
    OrderingKeyInfo,
    TenantInfo,
    blocked_keys,
    count_ordering_keys,
    count_tenants,
    list_ordering_keys,
    list_tenants,
    set_tenant_weight,
)
from .job_filter import JobFilter
from .limiters import (
    LimiterInfo,
    LimiterMethods,
    LimiterNotFound,
    LockInfo,
)
from .limiters import list_limiters as list_limiters
from .limiters import read_limiter as read_limiter
from .limiters import release_lock as release_lock
from .limiters import reset_limiter as reset_limiter
from .location import Explanation, Location
from .periodic import (
    LeaderInfo,
    PeriodicInfo,
    PeriodicMethods,
    PeriodicNotFound,
    leader_problem,
)
from .periodic import list_periodic as list_periodic
from .periodic import read_leader as read_leader
from .periodic import run_now as run_now
from .periodic import set_paused as set_paused
from .processes import ProcessInfo, ProcessNotFound, ProcessSet, RunningJob
from .queues import Queue, QueueInfo, list_queues
from .records import (
    ACTIVEJOB_WRAPPER,
    DEFAULT_MAX_SCAN,
    ActionResult,
    ClassCounts,
    JobRecord,
    Page,
)
from .records import to_text as to_text
from .server import RedisInfo, read_redis_info
from .sets import DeadSet, JobSet, RetrySet, ScheduledSet
from .stats import (
    CheckResult,
    ClassMetrics,
    DayStats,
    Stats,
    check_queues,
    read_class_metrics,
    read_class_totals,
    read_expired,
    read_expired_by_queue,
    read_history,
    read_stats,
)
from .workflows import (
    Waiting,
    WorkflowCounts,
    progress_of,
    record_of,
    waiting_count,
    waiting_jobs,
    workflow_counts,
)

SET_NAMES = {
    "scheduled": "scheduled",
    "schedule": "scheduled",
    "retry": "retries",
    "retries": "retries",
    "dead": "dead",
    "morgue": "dead",
}


class Api(PeriodicMethods, LimiterMethods):
    """Entry point of the admin API.

    Args:
        config: the rfetch Config (Redis URL, namespace; ``dead_max_jobs``,
            ``dead_timeout`` and ``death_handlers`` for kills). When None, a default Config
            with ``namespace`` is used, and ``redis`` must be given.
        redis: an existing client (bytes or ``decode_responses=True``); default: a new
            connection to ``config.redis_url``.
        namespace: key prefix, used only when ``config`` is None.

    Attributes:
        scheduled, retries, dead: the three sorted sets.
        processes: the worker processes.

    Raises:
        ValueError: neither ``config`` nor ``redis`` given, or a ``namespace`` that
            differs from ``config.namespace``.
        ConfigError: ``config.shards`` is set (one Api reads one Redis: see
            :class:`rfetch.api.shards.ShardedApi`); a bad Sentinel setting.
        RedisUnavailable: no sentinel of a Sentinel URL answered.
    """

    def __init__(
        self,
        config: Config | None = None,
        *,
        redis: Redis | None = None,
        namespace: str | None = None,
    ) -> None:
        if config is not None and namespace not in (None, config.namespace):
            raise ValueError("give the namespace in the Config, not both")
        if config is None:
            if redis is None:
                raise ValueError("Api needs a Config or a Redis client")
            config = Config(namespace=namespace)
        if config.shards and redis is None:
            # One Api reads one Redis; it must not quietly read redis_url instead.
            raise ConfigError(
                "this view reads one Redis, and shards are set (RFETCH_SHARDS): use "
                "rfetch.api.shards.ShardedApi (rfetch stats, rfetch queues), or point at one "
                "shard with its URL and no RFETCH_SHARDS"
            )
        self.config = config
        self.redis = redis if redis is not None else connect(config)
        self.ctx = Context.build(config, self.redis)
        self.keys = self.ctx.keys
        self.scheduled = ScheduledSet(self.ctx, "schedule", self.keys.schedule)
        self.retries = RetrySet(self.ctx, "retry", self.keys.retry)
        self.dead = DeadSet(self.ctx, "dead", self.keys.dead)
        self.processes = ProcessSet(self.ctx)

    def stats(self) -> Stats:
        """Processed/failed (ever and today, UTC), enqueued, set sizes, live processes and
        busy threads."""
        return read_stats(self.ctx)

    def redis_info(self) -> RedisInfo:
        """Version, uptime, clients, memory and eviction policy of the Redis server."""
        return read_redis_info(self.ctx)

    def history(self, days: int = 7, end: dt.date | None = None) -> list[DayStats]:
        """Processed/failed per UTC day for ``days`` days ending ``end`` (default today),
        newest first."""
        return read_history(self.ctx, days, end)

    def queues(self) -> list[QueueInfo]:
        """Every queue (from ``queues``, plus paused ones) with size, latency, paused."""
        return list_queues(self.ctx)

    def queue(self, name: str) -> Queue:
        """One queue by name (it need not exist yet)."""
        return Queue(self.ctx, name)

    def ordering_keys(
        self, queue: str | None = None, limit: int = 100, max_scan: int | None = 10_000
    ) -> list[OrderingKeyInfo]:
        """Held ordering keys: key, holder jid, where the holder is, jobs waiting.

        Raises:
            ValueError: ``limit`` below 1.
        """
        return list_ordering_keys(self.ctx, queue, limit, max_scan)

    def ordering_key_count(self, queue: str | None = None) -> int:
        """How many ordering keys are held, in ``queue`` or in every queue (one HLEN
        each)."""
        return count_ordering_keys(self.ctx, queue)

    def blocked_keys(
        self, queue: str | None = None, max_scan: int | None = 10_000
    ) -> list[OrderingKeyInfo]:
        """Ordering keys blocked by a failed job (in the retry set), with that job; retry
        or delete it (``api.retries``) to unblock the key. Found by reading at most
        ``max_scan`` entries of the retry set (see :func:`rfetch.api.groups.blocked_keys`).

        Raises:
            ValueError: ``max_scan`` below 1.
        """
        return blocked_keys(self.ctx, queue, max_scan)

    def tenants(self, queue: str, limit: int | None = None) -> list[TenantInfo]:
        """Tenants of a fair queue: backlog, weight, place in the ring; the
        first ``limit`` only when given.

        Raises:
            ValueError: ``limit`` below 1.
        """
        return list_tenants(self.ctx, queue, limit)

    def concurrency_keys(self, queue: str | None = None) -> list[ConcurrencyKey]:
        """Fetch caps: every concurrency key with jobs running or waiting (limit, running,
        waiting), of ``queue`` or of every capped queue (see
        :func:`rfetch.api.concurrency.concurrency_keys`)."""
        return concurrency_keys(self.ctx, queue)

    def expired_count(self) -> int:
        """Jobs dropped so far because they were not started within ``expires_in``
        (``stat:expired``)."""
        return read_expired(self.ctx)

    def expired_by_queue(self) -> dict[str, int]:
        """Queue name -> its jobs dropped as expired (``rfetch:expired``)."""
        return read_expired_by_queue(self.ctx)

    def tenant_count(self, queue: str) -> int:
        """How many tenants :meth:`tenants` lists for ``queue`` without a limit."""
        return count_tenants(self.ctx, queue)

    def set_tenant_weight(self, queue: str, tenant: str, weight: int) -> None:
        """Jobs per turn for ``tenant`` in ``queue`` (default 1), from its next turn.

        Raises:
            ValueError: a weight outside 1..1000, or a bad tenant name.
        """
        set_tenant_weight(self.ctx, queue, tenant, weight)

    def job_set(self, name: str) -> JobSet:
        """``scheduled``/``schedule``, ``retry``/``retries`` or ``dead``/``morgue``.

        Raises:
            ValueError: another name.
        """
        attr = SET_NAMES.get(name)
        if attr is None:
            raise ValueError(f"unknown job set {name!r}; use scheduled, retry or dead")
        job_set: JobSet = getattr(self, attr)
        return job_set

    def class_counts(self, max_scan: int | None = 10_000) -> list[ClassCounts]:
        """Jobs per class in every place a job can be: each queue, the scheduled, retry
        and dead sets, and running jobs; at most ``max_scan`` entries examined per place
        (``ClassCounts.complete`` says whether all were)."""
        found = [self.queue(q.name).class_counts(max_scan) for q in self.queues()]
        found += [s.class_counts(max_scan) for s in (self.scheduled, self.retries, self.dead)]
        running = self.processes.running()
        counts: dict[str, int] = {}
        for job in running:
            counts[job.job.job_class] = counts.get(job.job.job_class, 0) + 1
        found.append(ClassCounts("running", counts, len(running), len(running)))
        return found

    def class_metrics(self, minutes: int = 60) -> list[ClassMetrics]:
        """Per-class processed/failed and run-time percentiles over the last ``minutes``
        (1-120) minutes, from the workers' per-minute metrics."""
        return read_class_metrics(self.ctx, minutes)

    def class_totals(self) -> list[ClassMetrics]:
        """Per-class processed/failed and run-time histogram since the workers first
        flushed them (the counters of ``/metrics``); percentiles over that whole time."""
        return read_class_totals(self.ctx)

    def result_record(self, jid: str) -> Record | None:
        """The recorded outcome of a ``store_result`` job (status, result or error), or
        None when there is none (yet)."""
        return record_of(self.ctx, jid)

    def waiting(self, limit: int = 100) -> list[Waiting]:
        """Jobs waiting on another job (``after=``), oldest wait first."""
        return waiting_jobs(self.ctx, limit)

    def waiting_count(self) -> int:
        """How many jobs wait on another job."""
        return waiting_count(self.ctx)

    def workflow_counts(self) -> WorkflowCounts:
        """Results stored, jobs waiting and waiting jobs cancelled (for the metrics)."""
        return workflow_counts(self.ctx)

    def progress(self, jids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Progress reported by running jobs (``self.progress``): jid -> ``{percent,
        message, at}`` (epoch seconds), for those that reported."""
        return progress_of(self.ctx, jids)

    def explain(self, jid: str, max_scan: int | None = DEFAULT_MAX_SCAN) -> Explanation:
        """Where the job is and why it is not running; see :func:`rfetch.api.explain.explain`."""
        return explain(self.ctx, jid, max_scan)

    def cancel(
        self,
        jid: str,
        dead: bool = False,
        reason: str = "",
        max_scan: int | None = DEFAULT_MAX_SCAN,
    ) -> CancelResult:
        """Cancel a job: delete it where it waits, cancel it where a worker holds it; see
        :func:`rfetch.api.cancel.cancel`.

        Args:
            jid: the job id.
            dead: put the cancelled job in the dead set instead of dropping it.
            reason: shown in the error message and to the death handlers.
            max_scan: most entries examined per list or set (None: no bound).

        Raises:
            ValueError: an empty jid.
        """
        return cancel(self.ctx, jid, dead, reason, max_scan)

    def check(
        self,
        max_latency: float | None = None,
        max_size: int | None = None,
        queue: str | None = None,
    ) -> CheckResult:
        """Compare queue latency (seconds) and size with thresholds (see
        :func:`rfetch.api.stats.check_queues`), and fail when periodic schedules are
        registered but no process leads (:func:`rfetch.api.periodic.leader_problem`)."""
        result = check_queues(self.ctx, max_latency, max_size, queue)
        problem = leader_problem(self.ctx)
        if problem is None or not result.ok:
            return result
        return CheckResult(False, f"CRITICAL {problem}", result.queues)


__all__ = [
    "ACTIVEJOB_WRAPPER",
    "DEFAULT_MAX_SCAN",
    "ActionResult",
    "Api",
    "CancelResult",
    "CheckResult",
    "ClassCounts",
    "ClassMetrics",
    "ConcurrencyKey",
    "Context",
    "DayStats",
    "DeadSet",
    "Explanation",
    "Found",
    "JobFilter",
    "JobRecord",
    "JobSet",
    "LeaderInfo",
    "LimiterInfo",
    "LimiterNotFound",
    "Location",
    "LockInfo",
    "OrderingKeyInfo",
    "Page",
    "PeriodicInfo",
    "PeriodicNotFound",
    "ProcessInfo",
    "ProcessNotFound",
    "ProcessSet",
    "Queue",
    "QueueInfo",
    "RedisInfo",
    "RetrySet",
    "RunningJob",
    "ScheduledSet",
    "Stats",
    "TenantInfo",
]
