"""``cancel(jid)``: stop a job wherever it is.

First a cancel mark ``cancel:<jid>`` is written (kept :data:`~rfetch.jobs.job_control.CANCEL_TTL`,
24 h), indexed in ``rfetch:cancels`` and announced to the workers on ``rfetch:cancel``: a
worker never starts a job with a mark (it records it as cancelled instead, in the step
before ``perform``: :mod:`rfetch.worker.cancels`), and cancels a running one (its
timekeeper looks up the marks of its running jobs once a second). Then the job is looked
for as :func:`rfetch.api.explain.explain` does, and each copy found waiting (a queue, the
scheduled or retry set) is deleted, or moved to the dead set when ``dead`` is asked. A job
waiting where the API cannot take it from (fetched ahead by a worker, behind its ordering
key's holder, for a fetch cap's slot) is left there and ends as cancelled when a worker
would start it. A jid found nowhere, or only in the dead set, is reported as such and its
mark is removed.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from rfetch.errors import JobCancelled
from rfetch.jobs.job_control import CANCEL_TTL, cancel_mark
from rfetch.store.workflow_commands import WorkflowCommands

from .context import Context
from .explain import explain
from .location import Location
from .queues import Queue
from .records import JobRecord, dump_payload
from .set_moves import withdraw_cancels
from .sets import JobSet
from .workflows import batch_waiting_entry, waiting_job

CancelState = Literal["deleted", "cancelling", "marked", "dead", "not_found"]
"""What a cancel did: ``deleted`` (it was waiting, and is gone or in the dead set),
``cancelling`` (a worker holds it: running, it is cancelled there within about a second;
fetched and not started, it will not start; or that worker already buried it as
``rfetch.JobCancelled`` while the cancel looked for it), ``marked`` (waiting behind its ordering key
or for a fetch cap's slot, or moved while being looked for: it will not run, and is
recorded as cancelled when a worker would start it), ``dead`` (already in the dead set,
or its recorded outcome is a death or a cancel: nothing to do), ``not_found`` (finished,
deleted, or never seen)."""

CANCELLED_CLASS = "rfetch.JobCancelled"


@dataclass(frozen=True)
class CancelResult:
    """The answer of :func:`cancel`.

    Attributes:
        jid: the jid asked about.
        state: see :data:`CancelState`.
        places: where the job was found and what was done there, one line each.
    """

    jid: str
    state: CancelState
    places: list[str] = field(default_factory=list)

    @property
    def cancelled(self) -> bool:
        """Whether the cancel took (or will take) effect."""
        return self.state in ("deleted", "cancelling", "marked")

    @property
    def text(self) -> str:
        """One line for people."""
        if self.state == "not_found":
            return (
                f"jid {self.jid}: not found in running jobs, private lists, queues or the "
                "scheduled, retry and dead sets: it finished, was deleted, or never existed"
            )
        if self.state == "dead":
            if self.places:
                return f"jid {self.jid}: " + "; ".join(self.places)
            return f"jid {self.jid}: already in the dead set; nothing to cancel"
        return f"jid {self.jid}: " + "; ".join(self.places)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "jid": self.jid,
            "state": self.state,
            "cancelled": self.cancelled,
            "places": self.places,
            "text": self.text,
        }


def cancel(
    ctx: Context,
    jid: str,
    dead: bool = False,
    reason: str = "",
    max_scan: int | None = 100_000,
) -> CancelResult:
    """Cancel job ``jid``: delete it where it waits, cancel it where it runs.

    Args:
        ctx: the API context.
        jid: the job id.
        dead: put the cancelled job in the dead set (``error_class``
            ``rfetch.JobCancelled``) instead of dropping it.
        reason: shown in the error message and to the death handlers.
        max_scan: most entries examined per list or set (None: no bound).

    Raises:
        ValueError: an empty jid.
    """
    if not jid:
        raise ValueError("a jid is needed")
    now = time.time()
    _mark(ctx, jid, reason, dead, now)
    places: list[str] = []
    states: set[str] = set()
    for location in explain(ctx, jid, max_scan, now).locations:
        if location.state in ("batch", "cancel"):  # lines about it, not places
            continue
        if location.state == "waiting_dependency":
            state, text = _cancel_waiting(ctx, jid, dead, reason)
        else:
            state, text = _cancel_at(ctx, location, dead, reason, now)
        states.add(state)
        if text:
            places.append(text)
    for state in ("cancelling", "marked", "deleted"):
        if state in states:
            return CancelResult(jid, state, places)  # type: ignore[arg-type]
    _unmark(ctx, jid)
    return CancelResult(jid, "dead" if "dead" in states else "not_found", places)


def _mark(ctx: Context, jid: str, reason: str, dead: bool, now: float) -> None:
    """Write the cancel mark, index it in ``rfetch:cancels`` (stale entries pruned) and
    announce it on ``rfetch:cancel``: every worker then checks the job before it starts
    (:mod:`rfetch.worker.cancels`)."""
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.set(ctx.keys.cancel(jid), cancel_mark(reason, dead, now), ex=CANCEL_TTL)
    pipe.zadd(ctx.keys.cancels, {jid: now + CANCEL_TTL})
    pipe.zremrangebyscore(ctx.keys.cancels, "-inf", f"({now}")
    pipe.execute()
    ctx.redis.publish(ctx.keys.cancel_channel, jid)


def _unmark(ctx: Context, jid: str) -> None:
    """Withdraw the mark of a job found nowhere (or already dead)."""
    withdraw_cancels(ctx, [jid])


def _cancel_waiting(ctx: Context, jid: str, dead: bool, reason: str) -> tuple[str, str]:
    """A job waiting on another one or on a batch: out of its dependency's dependents (or
    the batch's waiting list), dropped or buried, its record written and the jobs waiting
    on it settled as its death does (``cancel_waiting.lua``)."""
    waiting = waiting_job(ctx, jid)
    if waiting is None:  # released meanwhile: the mark reaches it in its queue
        return "marked", "released while being cancelled: it will not run"
    entry: bytes | str = ""
    if waiting.batch:
        found = batch_waiting_entry(ctx, waiting.after, jid)
        if found is None:
            return "marked", "released while being cancelled: it will not run"
        entry = found[1]
    done, settled = WorkflowCommands(ctx.commands).cancel_waiting(
        jid, waiting.after, dead, reason, entry
    )
    if not done:
        return "marked", "released while being cancelled: it will not run"
    where = "moved to the dead set" if dead else "dropped"
    behind = f" ({settled} job(s) waiting on it settled too)" if settled else ""
    on = "batch" if waiting.batch else "job"
    return "deleted", f"waiting on {on} {waiting.after}: {where}{behind}"


def _ended_by_this_cancel(location: Location, now: float) -> bool:
    """Whether a dead-set entry is this cancel's own effect: a worker read the mark
    (written at ``now``, epoch seconds) while the lookup ran, and buried the job as
    ``rfetch.JobCancelled`` before the lookup reached the dead set. Such a cancel took
    effect, and says so, instead of "already in the dead set"."""
    record = location.job
    return (
        record is not None
        and record.error_class == CANCELLED_CLASS
        and location.at is not None
        and location.at >= now
    )


def _cancel_at(
    ctx: Context, location: Location, dead: bool, reason: str, now: float
) -> tuple[str, str]:
    """Act on one place the job was found: (state, line)."""
    record = location.job
    if location.state == "running":
        return "cancelling", f"running on {location.identity}: cancelled there within a second"
    if location.state == "held":
        return "cancelling", (
            f"fetched by {location.identity}, not started: it will not start (recorded as "
            "cancelled when a thread would take it)"
        )
    if location.state in ("recorded_dead", "recorded_cancelled"):
        what = "cancelled" if location.state == "recorded_cancelled" else "dead"
        return "dead", f"already ended ({what}, recorded): nothing to cancel"
    if location.state == "dead":
        if _ended_by_this_cancel(location, now):
            return "cancelling", (
                "cancelled by the worker that held it, as it was about to start: "
                "moved to the dead set"
            )
        return "dead", ""
    if location.state == "finished":
        return "not_found", ""

    if record is None:
        return "marked", f"{location.state}: it will not run (cancelled before it starts)"
    if location.state == "queued" and location.queue is not None:
        removed = Queue(ctx, location.queue).delete([record]).done > 0
        where = f"queue {location.queue}"
    elif location.state in ("scheduled", "retry"):
        # Through the set's delete action, which also releases an ordering key it blocks.
        name = "schedule" if location.state == "scheduled" else "retry"
        jobs = JobSet(ctx, name, ctx.keys.schedule if name == "schedule" else ctx.keys.retry)
        removed = jobs.delete([record]).done > 0
        where = f"the {location.state} set"
    else:  # behind its ordering key or for a cap's slot: stopped when it would start
        return "marked", (
            f"{location.text}: it will not run (recorded as cancelled when its turn comes)"
        )
    if not removed:  # taken meanwhile: the mark reaches it
        return "marked", (
            f"left {where} while being cancelled: cancelled before it starts, or at once "
            "if it was starting"
        )
    if dead:
        _bury(ctx, record, reason, now)
    behind = _abandon(ctx, record, dead, reason)
    if dead:
        return "deleted", f"removed from {where} and put in the dead set{behind}"
    return "deleted", f"deleted from {where}{behind}"


def _abandon(ctx: Context, record: JobRecord, dead: bool, reason: str) -> str:
    """A cancelled job's record (``store_result``), its death in its batch and the jobs
    waiting on it (``abandon.lua``); the text to add to the line."""
    payload = record.payload or {}
    ttl = payload.get("store_result")
    ttl = ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else None
    bid = payload.get("bid")
    bid = bid if isinstance(bid, str) and bid else None
    jid = record.jid
    if jid is None or (
        ttl is None and bid is None and not ctx.redis.exists(ctx.keys.dependents(jid))
    ):
        return ""
    message = str(JobCancelled(f"cancelled: {reason}" if reason else "cancelled"))
    settled = WorkflowCommands(ctx.commands).abandon(
        jid, ttl, "dead" if dead else "cancelled", reason, record.job_class, bid,
        json.dumps({"error_class": CANCELLED_CLASS, "error_message": message}),
    )
    return f" ({settled} job(s) waiting on it settled too)" if settled else ""


def _bury(ctx: Context, record: JobRecord, reason: str, now: float) -> None:
    """Add a cancelled job to the dead set with ``error_class`` ``rfetch.JobCancelled``."""
    payload = dict(record.payload or {})
    if not payload:
        ctx.redis.zadd(ctx.keys.dead, {record.raw: now})
        return
    payload["error_class"] = CANCELLED_CLASS
    payload["error_message"] = str(JobCancelled(f"cancelled: {reason}" if reason else "cancelled"))
    payload.setdefault("failed_at", now)
    ctx.redis.zadd(ctx.keys.dead, {dump_payload(payload): now})
