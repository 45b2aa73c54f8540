"""The moves of the scheduled, retry and dead sets' admin actions (Sidekiq's
``SortedEntry``): *retry* and *add to queue* push the job to its queue, *kill* moves it to
the dead set, *delete* removes it. Every move is one ``api_move.lua`` call: ``ZREM`` and
the push happen together, and only if this call removed the entry, so a job the poller
moved meanwhile is not pushed twice."""

from __future__ import annotations

import logging
from typing import Any

from rfetch.jobs.payload import MS_THRESHOLD, Routing

from .batches import kill_failure
from .context import Context
from .records import ActionResult, JobRecord, dump_payload

log = logging.getLogger("rfetch.api")

KILLED_BY_API = "Job killed by API"
"""Message of the exception given to death handlers when a job is killed by an admin
(Sidekiq's ``DeadSet#kill``)."""


def act(
    ctx: Context, key: str, action: str, records: list[JobRecord], result: ActionResult
) -> None:
    """Apply ``action`` to up to CHUNK ``records`` of the sorted set ``key``: one pipelined
    round trip of ``api_move.lua`` calls (plain ``ZREM`` for an unrouted delete); counts go
    to ``result``."""
    if not records:
        return
    pipe = ctx.redis.pipeline(transaction=False)
    sent: list[JobRecord] = []
    now = ctx.redis_time() if action != "delete" else 0.0
    for record in records:
        if _move(ctx, pipe, key, action, record, now):
            sent.append(record)
        else:
            result.skipped.append(record.jid or "(invalid)")
    if not sent:
        return
    if action in ("retry", "add_to_queue"):
        # Sending a job to its queue by hand means "run it": a cancel mark it still has
        # (a cancel that sent it to the dead set leaves it for CANCEL_TTL) is withdrawn
        # first, or a worker would cancel it again before it starts.
        withdraw_cancels(ctx, [r.jid for r in sent if r.jid])
    killed: list[JobRecord] = []
    for record, moved in zip(sent, pipe.execute(), strict=True):
        if moved:
            result.done += 1
            if action == "kill":
                killed.append(record)
        else:
            result.missing.append(record.jid or "(invalid)")
    _run_death_handlers(ctx, killed)


def _move(ctx: Context, pipe: Any, key: str, action: str, record: JobRecord, now: float) -> bool:
    """Queue ``action``'s move of ``record`` on ``pipe``; False for an entry that cannot be
    requeued (no JSON object or no ``queue`` string)."""
    if action == "delete" and record.routing is None:
        pipe.zrem(key, record.raw)
    elif action == "delete":
        # An ordering key or unique lock is released with the removal.
        ctx.commands.api_move(pipe, key, "delete", record.raw, record.raw, record.routing)
    elif action == "kill":
        ctx.commands.api_move(
            pipe,
            key,
            "dead",
            record.raw,
            record.raw,  # as it is, like Sidekiq's DeadSet#kill
            record.routing,
            score=now,
            trim_before=now - ctx.config.dead_timeout,
            cap=ctx.config.dead_max_jobs,
            failure=kill_failure(record.payload),
        )
    else:
        payload = requeue_payload(record, now, decrement=action == "retry")
        if payload is None:
            return False
        ctx.commands.api_move(
            pipe,
            key,
            "queue",
            record.raw,
            dump_payload(payload),
            Routing.of(payload),
            queue=str(payload["queue"]),
        )
    return True


def _run_death_handlers(ctx: Context, killed: list[JobRecord]) -> None:
    # Sidekiq's DeadSet#kill notifies the death handlers of a job killed by the API.
    for record in killed:
        if record.payload is None:
            continue
        for handler in ctx.config.death_handlers:
            try:
                handler(record.payload, RuntimeError(KILLED_BY_API))
            except Exception as exc:  # a broken handler must not stop the action
                log.error("death handler %r raised %r", handler, exc)


def withdraw_cancels(ctx: Context, jids: list[str]) -> None:
    """Delete the cancel marks of ``jids`` and their ``rfetch:cancels`` index entries (one
    round trip; a jid without a mark costs nothing)."""
    if not jids:
        return
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.delete(*(ctx.keys.cancel(jid) for jid in jids))
    pipe.zrem(ctx.keys.cancels, *jids)
    pipe.execute()


def requeue_payload(record: JobRecord, now: float, decrement: bool) -> dict[str, Any] | None:
    """The payload to push to its queue: a fresh ``enqueued_at`` (in milliseconds when the
    payload's ``created_at`` is in Sidekiq 8's milliseconds, else float seconds) and, for a
    retry, ``retry_count`` lowered by one (Sidekiq: a manual retry does not use up an
    attempt). None for an entry without a JSON object or a ``queue`` string."""
    if record.payload is None:
        return None
    payload = dict(record.payload)
    queue = payload.get("queue")
    if not isinstance(queue, str) or not queue:
        return None
    count = payload.get("retry_count")
    if decrement and isinstance(count, int) and not isinstance(count, bool):
        payload["retry_count"] = count - 1
    created = payload.get("created_at")
    in_ms = isinstance(created, (int, float)) and not isinstance(created, bool) and (
        created > MS_THRESHOLD
    )
    payload["enqueued_at"] = int(now * 1000) if in_ms else now
    return payload
