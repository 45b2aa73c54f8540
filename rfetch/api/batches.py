"""Batches as the dashboard and the CLI show them (Sidekiq Pro's Batches page): the list
with progress, one batch's jobs and failures, its callbacks' state, the event counters.

Read only; every read is bounded (a page of the ``batches`` index, a page of one batch's
jids). The keys are described in docs/data-model.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rfetch.batch.status import BatchStatus
from rfetch.errors import BatchNotFound

from .context import Context

State = Literal["running", "complete", "succeeded", "dead"]
JobState = Literal["pending", "succeeded", "failed", "died"]
EVENTS = ("created", "completed", "succeeded", "died")


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def _float(value: bytes | str | None) -> float | None:
    text = _text(value)
    return float(text) if text else None


@dataclass(frozen=True)
class BatchInfo:
    """One batch of the list.

    Attributes:
        bid, description, parent_bid: as created.
        created_at, complete_at, success_at, death_at: Redis time, float epoch seconds;
            None until the event fired.
        total, pending, failures: Sidekiq Pro's counters.
    """

    bid: str
    description: str
    parent_bid: str | None
    created_at: float
    total: int
    pending: int
    failures: int
    complete_at: float | None
    success_at: float | None
    death_at: float | None

    @property
    def state(self) -> State:
        """``succeeded``, ``dead`` (a job died), ``complete`` (every job ran; some failing)
        or ``running``."""
        if self.success_at is not None:
            return "succeeded"
        if self.death_at is not None:
            return "dead"
        return "complete" if self.complete_at is not None else "running"

    @property
    def percent(self) -> float:
        """Share of jobs that succeeded, 0-100 (100 for an empty batch)."""
        return 100.0 if self.total <= 0 else 100.0 * (self.total - self.pending) / self.total

    def as_dict(self) -> dict[str, Any]:
        """JSON-native form (``--json``)."""
        return {
            "bid": self.bid, "description": self.description, "parent_bid": self.parent_bid,
            "created_at": self.created_at, "total": self.total, "pending": self.pending,
            "failures": self.failures, "state": self.state, "complete_at": self.complete_at,
            "success_at": self.success_at, "death_at": self.death_at,
        }


@dataclass(frozen=True)
class BatchJob:
    """One job of a batch: its jid, its state in the batch, and its latest error."""

    jid: str
    state: JobState
    error_class: str = ""
    error_message: str = ""


@dataclass(frozen=True)
class CallbackInfo:
    """One callback of a batch: its class, queue and jid (chosen at creation), and when its
    event fired (it was pushed then), or None."""

    event: str
    job_class: str
    queue: str
    jid: str
    fired_at: float | None


@dataclass(frozen=True)
class BatchDetail:
    """One batch: its status, a page of its jobs (sorted by jid), its callbacks, its
    child batches."""

    status: BatchStatus
    jobs: list[BatchJob]
    job_count: int
    callbacks: list[CallbackInfo]
    kids: list[str]


def count_batches(ctx: Context) -> int:
    """Entries of the ``batches`` index (some may have expired)."""
    return int(ctx.redis.zcard(ctx.keys.batches))


def list_batches(ctx: Context, offset: int = 0, limit: int = 25) -> list[BatchInfo]:
    """A page of batches, newest first (two round trips); expired ones are left out.

    Raises:
        ValueError: a negative offset or a limit below 1.
    """
    if offset < 0 or limit < 1:
        raise ValueError("offset must be >= 0 and limit >= 1")
    k = ctx.keys
    raw: list[bytes | str] = ctx.redis.zrevrange(k.batches, offset, offset + limit - 1)  # type: ignore[assignment]
    bids = [_text(b) for b in raw]
    pipe = ctx.redis.pipeline(transaction=False)
    for bid in bids:
        pipe.hmget(k.batch(bid), "description", "parent", "created_at", "total", "pending",
                   "complete_at", "success_at", "death_at")
        pipe.hlen(k.batch_part(bid, "failinfo"))
    replies = pipe.execute() if bids else []
    out = []
    for i, bid in enumerate(bids):
        v, failinfo = replies[2 * i], int(replies[2 * i + 1])
        if v[3] is None:  # expired since it was listed
            continue
        out.append(BatchInfo(
            bid, _text(v[0]), _text(v[1]) or None, _float(v[2]) or 0.0, int(v[3]), int(v[4]),
            max(0, failinfo - 1), _float(v[5]), _float(v[6]), _float(v[7]),
        ))
    return out


def _callbacks(ctx: Context, bid: str, status: BatchStatus) -> list[CallbackInfo]:
    fired = {"complete": status.complete_at, "success": status.success_at,
             "death": status.death_at}
    templates = ctx.redis.hmget(ctx.keys.batch(bid), *(f"cb_{e}" for e in fired))
    out = []
    for event, template in zip(fired, templates, strict=True):
        if template is None:
            continue
        payload = json.loads(_text(template))
        out.append(CallbackInfo(event, str(payload.get("class", "")),
                                str(payload.get("queue", "")), str(payload.get("jid", "")),
                                fired[event]))
    return out


def batch_detail(ctx: Context, bid: str, offset: int = 0, limit: int = 100) -> BatchDetail:
    """Batch ``bid`` with a page of its jobs (sorted by jid).

    Raises:
        BatchNotFound: no such batch (never created, or expired).
        ValueError: a negative offset or a limit below 1.
    """
    if offset < 0 or limit < 1:
        raise ValueError("offset must be >= 0 and limit >= 1")
    status = BatchStatus(bid, redis=ctx.redis, keys=ctx.keys)
    k = ctx.keys
    jids = sorted(_text(j) for j in ctx.redis.smembers(k.batch_part(bid, "jids")))
    page = jids[offset : offset + limit]
    failures = {f.jid: f for f in status.failure_info}
    pipe = ctx.redis.pipeline(transaction=False)
    for jid in page:
        pipe.sismember(k.batch_part(bid, "done"), jid)
        pipe.sismember(k.batch_part(bid, "died"), jid)
    flags = pipe.execute() if page else []
    jobs = []
    for i, jid in enumerate(page):
        done, died = bool(flags[2 * i]), bool(flags[2 * i + 1])
        failure = failures.get(jid)
        state: JobState = (
            "succeeded" if done else "died" if died else "failed" if failure else "pending"
        )
        jobs.append(BatchJob(jid, state, failure.error_class if failure else "",
                             failure.error_message if failure else ""))
    kids = sorted(_text(b) for b in ctx.redis.smembers(k.batch_part(bid, "kids")))
    return BatchDetail(status, jobs, len(jids), _callbacks(ctx, bid, status), kids)


def batch_lines(ctx: Context, jid: str, payloads: Iterable[Mapping[str, Any]]) -> list[str]:
    """``explain``'s lines about the batch of a job found with a ``bid`` (in any of
    ``payloads``, the entries found): the job's state in the batch, the batch's counters
    and what its callbacks wait for."""
    out = []
    bids = {p.get("bid") for p in payloads}
    for bid in sorted(b for b in bids if isinstance(b, str) and b):
        try:
            st = BatchStatus(bid, redis=ctx.redis, keys=ctx.keys)
        except BatchNotFound:
            out.append(f"in batch {bid}, which no longer exists (expired)")
            continue
        k = ctx.keys
        pipe = ctx.redis.pipeline(transaction=False)
        pipe.sismember(k.batch_part(bid, "done"), jid)
        pipe.sismember(k.batch_part(bid, "died"), jid)
        done, died = pipe.execute()
        failing = jid in st.failed_jids
        mine = ("succeeded" if done else "died" if died else "failing" if failing
                else "not yet run to its end")
        waits = [e for e, at in (("complete", st.complete_at), ("success", st.success_at))
                 if at is None and e in st.callbacks]
        text = (f"in batch {bid} ({st.description or 'no description'}): this job "
                f"{mine}; {st.total - st.pending} of {st.total} jobs succeeded, "
                f"{st.failures} failing")
        if waits:
            text += "; the " + " and ".join(waits) + " callback(s) wait for the rest"
        if st.death_at is not None:
            text += "; a job of the batch died, so its success waits for a retry from the dead set"
        out.append(text)
    return out


def kill_failure(payload: Mapping[str, Any] | None) -> str:
    """A job killed by hand (the retry or scheduled set's *kill*): its death in its batch,
    as JSON ``{"error_class", "error_message"}`` (its last error, if it had one)."""
    job = payload or {}
    return json.dumps({
        "error_class": str(job.get("error_class") or "rfetch.Killed"),
        "error_message": str(job.get("error_message") or "killed by hand"),
    })


def batch_counters(ctx: Context) -> dict[str, int]:
    """Batches created, completed, succeeded and died since the counters began."""
    values = ctx.redis.mget([ctx.keys.batch_counter(e) for e in EVENTS])
    return {event: int(v or 0) for event, v in zip(EVENTS, values, strict=True)}


__all__ = [
    "BatchDetail",
    "BatchInfo",
    "BatchJob",
    "BatchNotFound",
    "CallbackInfo",
    "batch_counters",
    "batch_detail",
    "batch_lines",
    "count_batches",
    "list_batches",
]
