"""Counters and monitoring: Sidekiq's stats, history by day, per-class metrics over the last
hour, and the threshold check behind ``rfetch check``."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any

from rfetch.observability.stats import BUCKETS_MS, TOTALS

from .context import Context
from .queues import QueueInfo, list_queues
from .records import finite_or_none, to_text


def _count(value: Any) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


@dataclass(frozen=True)
class Stats:
    """The dashboard numbers (Sidekiq's ``Stats``).

    Attributes:
        processed, failed: executions ever (``stat:processed`` / ``stat:failed``; a failed
            execution counts in both).
        processed_today, failed_today: the same for the current UTC day.
        enqueued: jobs waiting in all queues (sum of their sizes).
        scheduled_size, retry_size, dead_size: entries of the three sorted sets.
        processes: worker processes whose heartbeat is alive.
        busy: threads running a job, summed over live heartbeats.
        queues: queue name -> size.
    """

    processed: int
    failed: int
    processed_today: int
    failed_today: int
    enqueued: int
    scheduled_size: int
    retry_size: int
    dead_size: int
    processes: int
    busy: int
    queues: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "processed": self.processed,
            "failed": self.failed,
            "processed_today": self.processed_today,
            "failed_today": self.failed_today,
            "enqueued": self.enqueued,
            "scheduled_size": self.scheduled_size,
            "retry_size": self.retry_size,
            "dead_size": self.dead_size,
            "processes": self.processes,
            "busy": self.busy,
            "queues": self.queues,
        }


def utc_day(at: float | None = None) -> str:
    """``YYYY-MM-DD`` of the UTC day at ``at`` (epoch seconds; default now), as the daily
    counters are named."""
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if at is None else at))


def read_stats(ctx: Context, now: float | None = None) -> Stats:
    """Read every counter in three round trips.

    Args:
        ctx: the API context.
        now: the time whose UTC day is "today", epoch seconds (default: this machine's).
    """
    keys = ctx.keys
    day = utc_day(now)
    pipe = ctx.redis.pipeline(transaction=False)
    # MGET as a plain command: redis-py's cluster pipeline refuses its mget() method,
    # though all four keys are in the namespace's one hash slot.
    pipe.execute_command(  # type: ignore[no-untyped-call]
        "MGET",
        keys.stat("processed"), keys.stat("failed"),
        keys.stat("processed", day), keys.stat("failed", day),
    )
    pipe.zcard(keys.schedule)
    pipe.zcard(keys.retry)
    pipe.zcard(keys.dead)
    pipe.smembers(keys.queues)
    pipe.smembers(keys.processes)
    counters, scheduled, retry, dead, queue_names, process_names = pipe.execute()
    queues = sorted(to_text(q) for q in queue_names)
    identities = sorted(to_text(p) for p in process_names)
    pipe = ctx.redis.pipeline(transaction=False)
    for queue in queues:  # a queue's size: its list and its priority set
        pipe.llen(keys.queue(queue))
        pipe.zcard(keys.prio(queue))
    for identity in identities:
        pipe.hmget(keys.process(identity), "beat", "busy")
    replies = pipe.execute()
    n = 2 * len(queues)
    sizes = {q: int(replies[2 * i]) + int(replies[2 * i + 1]) for i, q in enumerate(queues)}
    beats = [b for b in replies[n:] if b[0] is not None]
    return Stats(
        processed=_count(counters[0]),
        failed=_count(counters[1]),
        processed_today=_count(counters[2]),
        failed_today=_count(counters[3]),
        enqueued=sum(sizes.values()),
        scheduled_size=int(scheduled),
        retry_size=int(retry),
        dead_size=int(dead),
        processes=len(beats),
        busy=sum(_count(b[1]) for b in beats),
        queues=sizes,
    )


@dataclass(frozen=True)
class DayStats:
    """Counts of one UTC day.

    Attributes:
        date: ``YYYY-MM-DD``.
        processed, failed: executions that day.
    """

    date: str
    processed: int
    failed: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"date": self.date, "processed": self.processed, "failed": self.failed}


def read_history(ctx: Context, days: int = 7, end: dt.date | None = None) -> list[DayStats]:
    """Daily counts for ``days`` UTC days ending with ``end`` (default today), newest first,
    in one MGET (Sidekiq's ``Stats::History``). Days without a key count 0.

    Raises:
        ValueError: ``days`` < 1.
    """
    if days < 1:
        raise ValueError("days must be 1 or more")
    last = end or dt.datetime.now(dt.timezone.utc).date()
    dates = [(last - dt.timedelta(days=i)).isoformat() for i in range(days)]
    names = [ctx.keys.stat(kind, d) for d in dates for kind in ("processed", "failed")]
    values = ctx.redis.mget(names)
    return [
        DayStats(d, _count(values[2 * i]), _count(values[2 * i + 1]))
        for i, d in enumerate(dates)
    ]


@dataclass(frozen=True)
class ClassMetrics:
    """Executions of one job class over recent minutes (written by the workers'
    heartbeats to ``rfetch:metrics:<YYYYmmddHHMM>``).

    Attributes:
        job_class: the payload's class.
        processed, failed: executions (failed ones count in both).
        p50_ms, p95_ms, p99_ms: run-time percentiles, as the upper bound of the histogram
            bucket they fall in (milliseconds); ``inf`` above the last bound (1 h); None
            without executions.
        buckets: executions per bucket; bucket i holds runs of at most
            ``rfetch.observability.stats.BUCKETS_MS[i]`` ms, the last one the rest.
    """

    job_class: str
    processed: int
    failed: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    buckets: list[int]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``inf`` percentiles become None)."""
        return {
            "class": self.job_class,
            "processed": self.processed,
            "failed": self.failed,
            "p50_ms": finite_or_none(self.p50_ms),
            "p95_ms": finite_or_none(self.p95_ms),
            "p99_ms": finite_or_none(self.p99_ms),
            "buckets": self.buckets,
        }


def _percentile(buckets: list[int], fraction: float) -> float | None:
    total = sum(buckets)
    if total == 0:
        return None
    wanted = fraction * total
    seen = 0
    for i, count in enumerate(buckets):
        seen += count
        if seen >= wanted:
            return float(BUCKETS_MS[i]) if i < len(BUCKETS_MS) else float("inf")
    return float("inf")


def read_class_metrics(
    ctx: Context, minutes: int = 60, now: float | None = None
) -> list[ClassMetrics]:
    """Per-class processed/failed and run-time percentiles over the last ``minutes`` UTC
    minutes (including the current one), most processed first, in one round trip.

    Args:
        ctx: the API context.
        minutes: window, 1 to 120 (the minute hashes are kept 2 hours).
        now: end of the window, epoch seconds (default: this machine's clock).

    Raises:
        ValueError: ``minutes`` out of range.
    """
    if not 1 <= minutes <= 120:
        raise ValueError("minutes must be between 1 and 120")
    end = time.time() if now is None else now
    pipe = ctx.redis.pipeline(transaction=False)
    for i in range(minutes):
        pipe.hgetall(ctx.keys.metrics(time.strftime("%Y%m%d%H%M", time.gmtime(end - 60 * i))))
    return _class_metrics(pipe.execute())


def read_class_totals(ctx: Context) -> list[ClassMetrics]:
    """Per-class processed/failed and run-time histogram since the workers first flushed
    (``rfetch:metrics:totals``, never expired; what Prometheus counters are made of), most
    processed first, in one round trip."""
    return _class_metrics([ctx.redis.hgetall(ctx.keys.metrics(TOTALS))])


def _class_metrics(hashes: list[dict[Any, Any]]) -> list[ClassMetrics]:
    """Sum of the per-class fields (``<class>|p``, ``|f``, ``|b<i>``) of metrics hashes."""
    nbuckets = len(BUCKETS_MS) + 1
    totals: dict[str, list[int]] = {}  # class -> [processed, failed, *buckets]
    for fields in hashes:
        for raw_field, raw_value in fields.items():
            name, _, kind = to_text(raw_field).rpartition("|")
            row = totals.setdefault(name, [0] * (2 + nbuckets))
            value = _count(raw_value)
            if kind == "p":
                row[0] += value
            elif kind == "f":
                row[1] += value
            elif kind.startswith("b") and kind[1:].isdigit() and int(kind[1:]) < nbuckets:
                row[2 + int(kind[1:])] += value
    result = [
        ClassMetrics(
            job_class=name,
            processed=row[0],
            failed=row[1],
            p50_ms=_percentile(row[2:], 0.50),
            p95_ms=_percentile(row[2:], 0.95),
            p99_ms=_percentile(row[2:], 0.99),
            buckets=row[2:],
        )
        for name, row in totals.items()
    ]
    return sorted(result, key=lambda m: (-m.processed, m.job_class))


@dataclass(frozen=True)
class CheckResult:
    """Outcome of :func:`check_queues`.

    Attributes:
        ok: no threshold crossed.
        message: one line: ``OK ...`` or the first reason it failed (``CRITICAL ...``).
        queues: the queues looked at.
    """

    ok: bool
    message: str
    queues: list[QueueInfo]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"ok": self.ok, "message": self.message,
                "queues": [q.to_dict() for q in self.queues]}


def check_queues(
    ctx: Context,
    max_latency: float | None = None,
    max_size: int | None = None,
    queue: str | None = None,
    now: float | None = None,
    full_at: float = 0.8,
) -> CheckResult:
    """Compare queue latency and size with thresholds (for cron, Nagios, Kubernetes probes).

    Args:
        ctx: the API context.
        max_latency: seconds the oldest job of a queue may have waited; None: no check.
        max_size: jobs a queue may hold; None: no check.
        queue: check this queue only (default: every queue in ``queues``).
        now: epoch seconds for the latency (default: this machine's clock).
        full_at: fraction of a queue's ``max_queue_size`` (``Config.max_queue_size``,
            backpressure) past which the check warns, before pushes get ``QueueFull``.
    """
    queues = list_queues(ctx, now)
    if queue is not None:
        queues = [q for q in queues if q.name == queue] or [
            QueueInfo(queue, 0, 0.0, False)
        ]
    problems: list[str] = []
    for q in queues:
        if max_size is not None and q.size > max_size:
            problems.append(f"queue {q.name} has {q.size} jobs (max {max_size})")
        if max_latency is not None and q.latency > max_latency:
            problems.append(
                f"queue {q.name} latency is {q.latency:.1f} s (max {max_latency:g} s)"
            )
    for q in queues:
        cap = ctx.config.max_queue_size.get(q.name)
        if cap is not None and q.size > full_at * cap:
            problems.append(
                f"queue {q.name} holds {q.size} of its max_queue_size {cap} "
                f"({100 * q.size / cap:.0f}%, warning past {100 * full_at:.0f}%): pushes get "
                "QueueFull at the max"
            )
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return CheckResult(False, f"CRITICAL {problems[0]}{more}", queues)
    if not queues:
        return CheckResult(True, "OK no queues", queues)
    biggest = max(queues, key=lambda q: q.size)
    slowest = max(queues, key=lambda q: q.latency)
    return CheckResult(
        True,
        f"OK {len(queues)} queue(s); largest {biggest.name} {biggest.size} jobs; "
        f"highest latency {slowest.name} {slowest.latency:.1f} s",
        queues,
    )


def read_expired(ctx: Context) -> int:
    """Jobs dropped so far because they were not started within ``expires_in``
    (``stat:expired``)."""
    value = ctx.redis.get(ctx.keys.expired)
    return int(value) if value is not None else 0


def read_expired_by_queue(ctx: Context) -> dict[str, int]:
    """Queue name -> its jobs dropped as expired (``rfetch:expired``)."""
    found = ctx.redis.hgetall(ctx.keys.expired_queues)
    return {to_text(q): int(n) for q, n in found.items()}
