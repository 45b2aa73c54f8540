"""The read side of workflows: recorded outcomes, waiting jobs and progress, for explain,
the web UI, the CLI and the metrics (see docs/workflows.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rfetch.formatting import relative, utc_time
from rfetch.workflow.record import Record, read_record

from .context import Context

RESULT_PREVIEW = 200
"""Characters of a recorded return value shown in an explain line."""


@dataclass(frozen=True)
class Waiting:
    """A job waiting on another one (``after=``).

    Attributes:
        jid: the waiting job.
        after: the jid it waits on.
        since: when it started waiting, float epoch seconds (Redis's clock).
        job_class: its class name.
        queue: the queue it goes to when released.
        outcome: ``"success"`` or ``"complete"`` (``after_outcome``).
        on_death: ``"dead"`` or ``"cancel"`` (``on_dependency_death``).
        batch: ``after`` is a batch's bid (the job waits in the batch's waiting list).
    """

    jid: str
    after: str
    since: float
    job_class: str
    queue: str
    outcome: str = "success"
    on_death: str = "dead"
    batch: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)


def waiting_job(ctx: Context, jid: str) -> Waiting | None:
    """The waiting entry of ``jid`` (one HGET, then one HGET of its payload), or None."""
    raw = ctx.redis.hget(ctx.keys.waiting, jid)
    if raw is None:
        return None
    entry = json.loads(raw)
    after = str(entry.get("after", ""))
    batch = bool(entry.get("batch"))
    payload = _batch_waiter(ctx, after, jid) if batch else None
    if payload is None:
        payload_raw = ctx.redis.hget(ctx.keys.dependents(after), jid)
        payload = json.loads(payload_raw) if payload_raw else {}
    return Waiting(
        jid,
        after,
        float(entry.get("since") or 0.0),
        str(entry.get("class") or ""),
        str(entry.get("queue") or ""),
        str(payload.get("after_outcome") or "success"),
        str(payload.get("on_dependency_death") or "dead"),
        batch,
    )


def batch_waiting_entry(ctx: Context, bid: str, jid: str) -> tuple[str, bytes | str] | None:
    """(waiting list, exact entry) of ``jid`` waiting on batch ``bid``, or None."""
    for part in ("waiting-success", "waiting-complete"):
        key = ctx.keys.batch_part(bid, part)
        for raw in ctx.redis.lrange(key, 0, -1):
            try:
                if json.loads(raw).get("jid") == jid:
                    return key, raw
            except ValueError:
                continue
    return None


def _batch_waiter(ctx: Context, bid: str, jid: str) -> dict[str, Any] | None:
    found = batch_waiting_entry(ctx, bid, jid)
    return json.loads(found[1]) if found is not None else None


def waiting_jobs(ctx: Context, limit: int = 100) -> list[Waiting]:
    """Up to ``limit`` waiting jobs, oldest wait first, among the first ``10 x limit`` an
    HSCAN of ``rfetch:waiting`` returns (the index is a hash: its order is Redis's)."""
    out: list[Waiting] = []
    for jid, raw in ctx.redis.hscan_iter(ctx.keys.waiting, count=500):
        entry = json.loads(raw)
        out.append(Waiting(
            jid.decode() if isinstance(jid, bytes) else str(jid),
            str(entry.get("after", "")),
            float(entry.get("since") or 0.0),
            str(entry.get("class") or ""),
            str(entry.get("queue") or ""),
        ))
        if len(out) >= 10 * limit:
            break
    return sorted(out, key=lambda w: w.since)[:limit]


@dataclass(frozen=True)
class WorkflowCounts:
    """Workflow figures for the metrics.

    Attributes:
        results_stored: outcomes recorded so far (``rfetch:results-stored``).
        waiting: jobs waiting on another job now.
        dependency_cancelled: waiting jobs dropped because their dependency died
            (``on_dependency_death="cancel"``) or cancelled while waiting.
    """

    results_stored: int
    waiting: int
    dependency_cancelled: int


def workflow_counts(ctx: Context) -> WorkflowCounts:
    """The workflow figures, in one round trip."""
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.get(ctx.keys.results_stored)
    pipe.hlen(ctx.keys.waiting)
    pipe.get(ctx.keys.deps_cancelled)
    stored, waiting, cancelled = pipe.execute()
    return WorkflowCounts(int(stored or 0), int(waiting or 0), int(cancelled or 0))


def waiting_count(ctx: Context) -> int:
    """How many jobs wait on another one (HLEN)."""
    return int(ctx.redis.hlen(ctx.keys.waiting))


def record_of(ctx: Context, jid: str) -> Record | None:
    """The recorded outcome of ``jid`` (``store_result``), or None."""
    return read_record(ctx.redis, ctx.keys, jid)


def progress_of(ctx: Context, jids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The progress of running jobs (one MGET): jid -> ``{percent, message, at}``, for the
    jobs that reported some."""
    if not jids:
        return {}
    values = ctx.redis.mget([ctx.keys.progress(j) for j in jids])
    out: dict[str, dict[str, Any]] = {}
    for jid, raw in zip(jids, values, strict=True):
        if raw:
            try:
                out[jid] = json.loads(raw)
            except ValueError:
                continue
    return out


def record_text(record: Record, now: float) -> str:
    """One explain line for a recorded outcome."""
    when = (
        f"{utc_time(record.finished_at)} ({relative(record.finished_at, now)})"
        if record.finished_at is not None
        else "(unknown time)"
    )
    if record.status == "succeeded":
        value = json.dumps(record.value)
        if len(value) > RESULT_PREVIEW:
            value = value[:RESULT_PREVIEW] + "..."
        return f"finished {when}: succeeded, result {value}"
    return f"{record.status} {when}: {record.error_class}: {record.error_message}"


def waiting_text(ctx: Context, waiting: Waiting, now: float) -> str:
    """One explain line for a waiting job: what it waits for, and where that job is."""
    goal = "to succeed" if waiting.outcome == "success" else "to finish (success or not)"
    dep = None if waiting.batch else record_of(ctx, waiting.after)
    what = "batch" if waiting.batch else "job"
    if waiting.batch:
        total, pending = ctx.redis.hmget(ctx.keys.batch(waiting.after), "total", "pending")
        state = (
            f"{int(pending or 0)} of {int(total or 0)} of its jobs pending"
            if total is not None
            else "the batch has expired"
        )
    elif dep is None:
        state = (
            "no outcome recorded yet (it is pending, running or retrying; a dependency "
            "pushed without store_result, or whose record expired, never releases it: "
            "cancel this job)"
        )
    else:
        state = f"it is {dep.status}"
    on_death = "the dead set" if waiting.on_death == "dead" else "cancelled"
    return (
        f"waits for {what} {waiting.after} {goal}, outside every queue, since "
        f"{utc_time(waiting.since)} ({relative(waiting.since, now)}); {state}; then to queue "
        f"{waiting.queue} (if it dies: {on_death})"
    )


def workflow_lines(
    ctx: Context, jid: str, now: float
) -> list[tuple[str, str, str | None, float | None]]:
    """What explain adds for ``jid``: (state, line, queue, time) of its wait on another job
    (``waiting_dependency``) and of its recorded outcome (``finished``, ``recorded_dead``,
    ``recorded_cancelled``)."""
    out: list[tuple[str, str, str | None, float | None]] = []
    waiting = waiting_job(ctx, jid)
    if waiting is not None:
        out.append(("waiting_dependency", waiting_text(ctx, waiting, now), waiting.queue, None))
    record = record_of(ctx, jid)
    if record is not None:
        state = "finished" if record.status == "succeeded" else f"recorded_{record.status}"
        out.append((state, record_text(record, now), None, record.finished_at))
    return out
