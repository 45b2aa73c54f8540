"""``explain(jid)``: where a job is, and why it is not running.

Looked at, cheapest first: the busy threads of every process (``<identity>:work``), the
private lists of every process rfetch knows (``processes``, ``rfetch:identities``,
``rfetch:suspects``), every public queue, the scheduled, retry and dead sets, and, only when
the job was found nowhere else, a bounded SCAN for private lists of unknown processes.
Lists and sets are searched on the server in windows (``api_find.lua``) up to ``max_scan``
entries each; the answer names every place where that bound stopped the search.
"""

from __future__ import annotations

import json
import time

from rfetch.formatting import relative, utc_time
from rfetch.jobs.job_control import read_cancel_mark
from rfetch.store.cluster import node_client

from .batches import batch_lines
from .concurrency import cap_lines
from .context import Context, queue_names_of
from .durable import durable_lines
from .groups import gate_lines
from .location import Explanation, Location
from .priority_jobs import find_in_queue
from .processes import ProcessInfo, ProcessSet
from .queues import list_queues
from .records import JobRecord, to_text
from .workflows import workflow_lines

CANCELLABLE = frozenset({"running", "held", "queued", "waiting_key", "waiting_cap"})
"""Where a job may be when a cancel mark is pending: a worker may still start or run it."""

KEY_SCAN_COUNT = 1000
"""COUNT hint of each SCAN step when looking for private lists of unknown processes."""


def _when(at: float | None, now: float) -> str:
    if at is None:
        return "(unknown time)"
    return f"{utc_time(at)} ({relative(at, now)})"


def explain(
    ctx: Context, jid: str, max_scan: int | None = 100_000, now: float | None = None
) -> Explanation:
    """Where the job ``jid`` is and why it is not running.

    Args:
        ctx: the API context.
        jid: the job id.
        max_scan: most entries examined per list or set (and keys examined by the SCAN
            for unknown private lists); None for no bound.
        now: epoch seconds for relative times (default: this machine's clock).
    """
    at = time.time() if now is None else now
    result = Explanation(jid)
    processes = {p.identity: p for p in ProcessSet(ctx).all(include_dead=True)}
    running_on = _running(ctx, result, processes, jid, at)
    known = _known_private_lists(ctx, processes)
    for identity, queues in sorted(known.items()):
        for queue in sorted(queues):
            _held(ctx, result, processes, identity, queue, jid, running_on, max_scan)
    _queued(ctx, result, processes, jid, max_scan)
    _sorted_sets(ctx, result, jid, at, max_scan)
    for state, text, record in gate_lines(ctx, jid, max_scan):
        named = record.payload.get("queue") if record.payload else None
        result.locations.append(
            Location(
                state=state,
                text=text,
                job=record,
                queue=named if isinstance(named, str) else None,
                position=record.position,
            )
        )
    for line in workflow_lines(ctx, jid, at):  # after=, store_result
        result.locations.append(Location(line[0], line[1], queue=line[2], at=line[3]))
    for text, record in cap_lines(ctx, jid, max_scan):
        result.locations.append(
            Location(state="waiting_cap", text=text, job=record,
                     queue=record.queue, position=record.position)
        )
    if not result.locations:
        _scan_unknown_private_lists(ctx, result, processes, known, jid, max_scan)
    payloads = [loc.job.payload for loc in result.locations if loc.job and loc.job.payload]
    result.locations.extend(Location("batch", text) for text in batch_lines(ctx, jid, payloads))
    _cancel_line(ctx, result, jid)
    result.locations.extend(Location(state, text) for state, text in durable_lines(ctx, jid))
    return result


def _cancel_line(ctx: Context, result: Explanation, jid: str) -> None:
    """A line ``cancel`` when the job waits, or runs, under a cancel mark (one GET, only
    for a job found where a worker may still start or run it)."""
    if not any(loc.state in CANCELLABLE for loc in result.locations):
        return
    mark = ctx.redis.get(ctx.keys.cancel(jid))
    if mark is None:
        return
    reason, dead = read_cancel_mark(mark)
    why = f" ({reason})" if reason else ""
    where = "the dead set" if dead else "dropped"
    result.locations.append(Location(
        "cancel",
        f"cancel requested{why}: it will not start (a running job stops); then {where}",
    ))


def _running(
    ctx: Context, result: Explanation, processes: dict[str, ProcessInfo], jid: str, now: float
) -> set[str]:
    """The busy threads running ``jid``. ``<identity>:work`` is rewritten only by the
    heartbeat, so it names a job for up to a heartbeat interval after its end: an entry
    counts only while the job is still in its private list (one LPOS of the exact bytes;
    a running job leaves it when it is acknowledged, settled or cancelled)."""
    found = [(p, job) for p in processes.values() for job in p.running if job.job.jid == jid]
    if not found:
        return set()
    pipe = ctx.redis.pipeline(transaction=False)
    for process, job in found:
        pipe.lpos(ctx.keys.private(process.identity, job.queue), job.job.raw)  # type: ignore[arg-type]
    held = pipe.execute(raise_on_error=False)
    identities: set[str] = set()
    for (process, job), position in zip(found, held, strict=True):
        if position is None:
            continue  # ended since the last heartbeat
        identities.add(process.identity)
        state = "alive" if process.alive else "dead: heartbeat expired"
        result.locations.append(
            Location(
                state="running",
                text=(
                    f"running on process {process.identity} ({state}), thread "
                    f"{job.thread_id}, fetched from queue {job.queue}, started "
                    f"{_when(job.run_at, now)}"
                ),
                job=job.job,
                queue=job.queue,
                at=job.run_at,
                identity=process.identity,
                alive=process.alive,
            )
        )
    return identities


def _known_private_lists(
    ctx: Context, processes: dict[str, ProcessInfo]
) -> dict[str, set[str]]:
    """identity -> queue names of the private lists it may own."""
    keys = ctx.keys
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.hgetall(keys.identities)
    pipe.hgetall(keys.suspects)
    identities, suspects = pipe.execute()
    known: dict[str, set[str]] = {}
    for name, value in identities.items():
        known.setdefault(to_text(name), set()).update(queue_names_of(value))
    for name, value in suspects.items():
        try:
            data = json.loads(value)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("queues"), list):
            queues = {q for q in data["queues"] if isinstance(q, str)}
            known.setdefault(to_text(name), set()).update(queues)
    for identity, process in processes.items():
        known.setdefault(identity, set()).update(process.queues)
    return known


def _held(
    ctx: Context,
    result: Explanation,
    processes: dict[str, ProcessInfo],
    identity: str,
    queue: str,
    jid: str,
    running_on: set[str],
    max_scan: int | None,
) -> None:
    key = ctx.keys.private(identity, queue)
    found = ctx.find(key, "list", [jid], "private", max_scan)
    if not found.complete:
        result.incomplete.append(f"private list of {identity} for queue {queue}")
    if not found.records or identity in running_on:
        return  # a running job stays in its private list until acknowledged
    process = processes.get(identity)
    alive = bool(process and process.alive)
    if alive:
        why = (
            "alive: fetched ahead (prefetch) and waiting for a free thread"
            if process is None or not process.quiet
            else "alive but quiet: it will be pushed back to the queue when the process stops"
        )
    else:
        why = (
            "dead: heartbeat expired; orphan recovery will push it back to queue "
            f"{queue}"
        )
    for record in found.records:
        result.locations.append(
            Location(
                state="held",
                text=f"held by process {identity} in its private list for queue {queue} "
                f"({why})",
                job=record,
                queue=queue,
                identity=identity,
                alive=alive,
            )
        )


def _queued(
    ctx: Context,
    result: Explanation,
    processes: dict[str, ProcessInfo],
    jid: str,
    max_scan: int | None,
) -> None:
    live = [p for p in processes.values() if p.alive]
    for info in list_queues(ctx):
        found = find_in_queue(ctx, info.name, [jid], max_scan)
        if not found.complete:
            result.incomplete.append(f"queue {info.name}")
        for record in found.records:
            ahead = record.position or 0
            reasons: list[str] = []
            if info.paused:
                reasons.append(
                    f"queue {info.name} is paused, so no worker takes jobs from it"
                )
            workers = [p for p in live if info.name in p.queues]
            if not workers:
                reasons.append(f"no live process works queue {info.name}")
            elif all(p.quiet for p in workers):
                reasons.append(f"every process working queue {info.name} is quiet")
            if not reasons and ahead > 0:
                reasons.append(f"{ahead} job(s) run before it")
            text = (
                f"waiting in queue {info.name} at position {ahead + 1} of {info.size} "
                f"(1 runs next)"
            )
            if record.priority:
                text += f", priority {record.priority} (higher runs first)"
            if reasons:
                text += ": " + "; ".join(reasons)
            result.locations.append(
                Location(
                    state="queued",
                    text=text,
                    job=record,
                    queue=info.name,
                    position=ahead,
                    queue_size=info.size,
                    paused=info.paused,
                )
            )


def _sorted_sets(
    ctx: Context, result: Explanation, jid: str, now: float, max_scan: int | None
) -> None:
    keys = ctx.keys
    for state, key in (("scheduled", keys.schedule), ("retry", keys.retry), ("dead", keys.dead)):
        found = ctx.find(key, "zset", [jid], ctx.keys.strip(key), max_scan)
        if not found.complete:
            result.incomplete.append(f"{state} set")
        for record in found.records:
            result.locations.append(
                Location(
                    state=state,
                    text=_set_text(state, record, now),
                    job=record,
                    queue=record.queue,
                    at=record.score,
                )
            )


def _set_text(state: str, record: JobRecord, now: float) -> str:
    at = record.score
    queue = record.queue or "(no queue)"
    error = ": ".join(x for x in (record.error_class, record.error_message) if x) or "(none)"
    if state == "scheduled":
        if at is not None and at <= now:
            return (
                f"scheduled for {_when(at, now)}: due; the poller of any running worker "
                f"moves it to queue {queue} within seconds"
            )
        return f"scheduled to run at {_when(at, now)}, then goes to queue {queue}"
    failures = (record.retry_count or 0) + 1
    if state == "retry":
        due = " (due: the poller moves it within seconds)" if at is not None and at <= now else ""
        return (
            f"in the retry set after {failures} failure(s) (retry_count "
            f"{record.retry_count}): next retry at {_when(at, now)}{due}, to queue {queue}; "
            f"last error: {error}"
        )
    return (
        f"dead since {_when(at, now)} after {failures} failure(s): {error}; it will not run "
        "unless retried (rfetch dead retry JID)"
    )


def _scan_unknown_private_lists(
    ctx: Context,
    result: Explanation,
    processes: dict[str, ProcessInfo],
    known: dict[str, set[str]],
    jid: str,
    max_scan: int | None,
) -> None:
    """SCAN (never KEYS) for private lists of processes rfetch does not know, examining at
    most ``max_scan`` keys."""
    cursor: int = 0
    examined = 0
    server = node_client(ctx.redis, ctx.keys.processes)  # a cluster: the namespace's master
    while True:
        cursor, names = server.scan(
            cursor, match=ctx.keys.private_pattern(), count=KEY_SCAN_COUNT
        )
        examined += KEY_SCAN_COUNT
        for name in names:
            parsed = ctx.keys.parse_private(to_text(name))
            if parsed is None or parsed[1] in known.get(parsed[0], set()):
                continue
            _held(ctx, result, processes, parsed[0], parsed[1], jid, set(), max_scan)
        if cursor == 0:
            return
        if max_scan is not None and examined >= max_scan:
            result.incomplete.append("SCAN for private lists of unknown processes")
            return
