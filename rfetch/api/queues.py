"""Public queues (``queue:<q>`` lists and their priority sets ``rfetch:prio:<q>``): size,
latency, pause, paging, delete, clear.

Workers take jobs of priority > 0 first, then the list from its right end, then jobs of
priority < 0 (:mod:`rfetch.api.priority_jobs`), so positions count in that order: position
0 is the job that runs next. Paging reads ``LRANGE``/``ZRANGE`` windows, never a whole list.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rfetch.jobs.payload import epoch_seconds

from .context import Context, Found, collect_page
from .job_filter import JobFilter
from .priority_jobs import find_in_queue, queue_parts, run_order
from .records import (
    DEFAULT_MAX_SCAN,
    ActionResult,
    ClassCounts,
    JobRecord,
    Page,
    parse_payload,
    to_text,
)


def latency_of(oldest: bytes | str | None, now: float) -> float:
    """Seconds since the oldest job (the right end) was enqueued; 0.0 for an empty queue or
    a job without a readable ``enqueued_at`` (Sidekiq's ``Queue#latency``; Sidekiq 8's
    milliseconds read too)."""
    if oldest is None:
        return 0.0
    payload = parse_payload(oldest)
    enqueued = epoch_seconds(payload.get("enqueued_at")) if payload else None
    return max(0.0, now - enqueued) if enqueued is not None else 0.0


@dataclass(frozen=True)
class QueueInfo:
    """One queue at a glance.

    Attributes:
        name: queue name.
        size: jobs waiting (its list and its priority set).
        latency: seconds the oldest job has waited (now minus its ``enqueued_at``).
        paused: whether workers take no job from it.
        shard: the shard it is on (``Config.shards``, :mod:`rfetch.api.shards`); None with
            one Redis.
    """

    name: str
    size: int
    latency: float
    paused: bool
    shard: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``shard`` only when there are shards)."""
        data: dict[str, Any] = {"name": self.name, "size": self.size,
                                "latency": self.latency, "paused": self.paused}
        if self.shard is not None:
            data["shard"] = self.shard
        return data


def list_queues(ctx: Context, now: float | None = None) -> list[QueueInfo]:
    """Every queue in the ``queues`` set (and every paused queue), sorted by name, in two
    round trips."""
    keys = ctx.keys
    pipe = ctx.redis.pipeline(transaction=False)
    pipe.smembers(keys.queues)
    pipe.smembers(keys.paused)
    known, paused = pipe.execute()
    paused_names = {to_text(n) for n in paused}
    names = sorted({to_text(n) for n in known} | paused_names)
    pipe = ctx.redis.pipeline(transaction=False)
    for name in names:
        pipe.llen(keys.queue(name))
        pipe.lindex(keys.queue(name), -1)
        pipe.zcard(keys.prio(name))
    replies = pipe.execute()
    at = time.time() if now is None else now
    return [
        QueueInfo(name, int(replies[3 * i]) + int(replies[3 * i + 2]),
                  latency_of(replies[3 * i + 1], at), name in paused_names)
        for i, name in enumerate(names)
    ]


class Queue:
    """One public queue.

    Args:
        ctx: the API context.
        name: queue name (``default``, not ``queue:default``).
    """

    def __init__(self, ctx: Context, name: str) -> None:
        self.ctx = ctx
        self.name = name
        self.key = ctx.keys.queue(name)
        self.location = f"queue:{name}"

    def size(self) -> int:
        """Jobs waiting: ``LLEN`` of the list plus ``ZCARD`` of the priority set."""
        return queue_parts(self.ctx, self.name).size

    def latency(self, now: float | None = None) -> float:
        """Seconds the oldest job has waited: ``now`` (default: this machine's clock, float
        epoch seconds) minus its ``enqueued_at``; 0.0 when empty."""
        oldest = self.ctx.redis.lindex(self.key, -1)
        return latency_of(oldest, time.time() if now is None else now)

    def is_paused(self) -> bool:
        """Whether the queue is in the ``paused`` set."""
        return bool(self.ctx.redis.sismember(self.ctx.keys.paused, self.name))

    def info(self) -> QueueInfo:
        """Size, latency and paused flag."""
        return QueueInfo(self.name, self.size(), self.latency(), self.is_paused())

    def pause(self) -> bool:
        """Stop workers taking jobs from this queue: ``SADD paused``, then ``PUBLISH`` on the
        pause channel, so every worker re-reads the set at once (well within a second).
        Running jobs finish; queued jobs stay. Returns False if already paused."""
        return self._set_paused(True)

    def unpause(self) -> bool:
        """Let workers take jobs again; returns False if it was not paused."""
        return self._set_paused(False)

    def _set_paused(self, paused: bool) -> bool:
        keys = self.ctx.keys
        if paused:
            changed = self.ctx.redis.sadd(keys.paused, self.name)
        else:
            changed = self.ctx.redis.srem(keys.paused, self.name)
        # After the set changed, not in its MULTI: a channel is no key, so a Redis Cluster
        # transaction cannot carry it. Workers that miss the message see the set anyway.
        self.ctx.redis.publish(
            keys.pause_channel, f"{'pause' if paused else 'unpause'} {self.name}"
        )
        return bool(changed)

    def page(
        self,
        offset: int = 0,
        limit: int = 25,
        *,
        newest_first: bool = False,
        job_filter: JobFilter | None = None,
        max_scan: int | None = DEFAULT_MAX_SCAN,
    ) -> Page:
        """One page of jobs in run order (priority set included), read in windows.

        Args:
            offset: jobs to skip, in the order asked for (``Page.next_offset`` of the page
                before).
            limit: most jobs returned.
            newest_first: start at the newest push (the left end) instead of the job that
                runs next (the right end).
            job_filter: only jobs that pass it; the scan then examines up to ``max_scan``
                entries from ``offset`` (``Page.complete`` says if it stopped early).
            max_scan: bound of a filtered scan; None for none.
        """
        if limit < 1 or offset < 0:
            raise ValueError("limit must be >= 1 and offset >= 0")
        filtered = job_filter is not None and not job_filter.empty
        bound = max_scan if filtered else limit
        records = run_order(self.ctx, self.name, offset, bound, newest_first)
        return collect_page(
            records,
            offset=offset,
            limit=limit,
            total=self.size(),
            job_filter=job_filter if filtered else None,
            max_scan=bound,
        )

    def find(self, jid: str, max_scan: int | None = DEFAULT_MAX_SCAN) -> Found:
        """Entries with this jid, searched on the server in the list and the priority set,
        at most ``max_scan`` entries each; ``position`` = jobs that run before it."""
        return find_in_queue(self.ctx, self.name, [jid], max_scan)

    def delete(
        self, targets: Iterable[JobRecord | str], max_scan: int | None = DEFAULT_MAX_SCAN
    ) -> ActionResult:
        """Delete jobs: records (``LREM`` of their exact value, as Sidekiq's
        ``JobRecord#delete``) or jids (found first, within ``max_scan`` entries)."""
        result = ActionResult("delete")
        records: list[JobRecord] = []
        jids: list[str] = []
        for target in targets:
            (jids if isinstance(target, str) else records).append(target)  # type: ignore[arg-type]
        if jids:
            found = find_in_queue(self.ctx, self.name, jids, max_scan)
            result.scanned, result.complete = found.scanned, found.complete
            records.extend(found.records)
            seen = {r.jid for r in found.records}
            result.missing.extend(j for j in jids if j not in seen)
        pipe = self.ctx.redis.pipeline(transaction=False)
        for record in records:
            routing = record.routing
            if record.score is not None:  # in the priority set
                prio = self.ctx.keys.prio(self.name)
                if routing is not None and routing.locking:  # as below, by ZREM
                    self.ctx.commands.finish(
                        prio, self.name, record.raw, routing, client=pipe, in_set=True
                    )
                else:
                    pipe.zrem(prio, record.raw)
                continue
            if routing is not None and routing.locking:
                # Deleting the job that holds an ordering key releases the key (its next
                # job goes out) and its unique lock.
                self.ctx.commands.finish(self.key, self.name, record.raw, routing, client=pipe)
                continue
            pipe.lrem(self.key, 1, record.raw)  # type: ignore[arg-type]
        for record, removed in zip(records, pipe.execute(), strict=True):
            if removed:
                result.done += 1
            else:
                result.missing.append(record.jid or "(invalid)")
        return result

    def delete_matching(
        self, job_filter: JobFilter, max_scan: int | None = DEFAULT_MAX_SCAN
    ) -> ActionResult:
        """Delete every job passing ``job_filter`` among the first ``max_scan`` entries from
        the job that runs next (a snapshot of each window is read, then ``LREM``)."""
        matched: list[JobRecord] = []
        scanned = 0
        for record in run_order(self.ctx, self.name, 0, max_scan, False):
            scanned += 1
            if job_filter.matches(record):
                matched.append(record)
        result = self.delete(matched)
        result.scanned = scanned
        result.complete = (
            max_scan is None or scanned < max_scan or self.size() + result.done <= scanned
        )
        return result

    def clear(self) -> int:
        """Delete the queue: ``UNLINK`` it and ``SREM`` it from ``queues`` in one MULTI
        (Sidekiq's ``Queue#clear``). Returns the jobs deleted (in ``queue:<q>`` and its
        priority set).

        The queue's ordering-key gate goes too: the key holders and the jobs
        waiting in the key lists are deleted, so no key stays blocked by a deleted job. A
        keyed job running meanwhile finishes without releasing anything; a keyed job in the
        retry or scheduled set meets an empty gate when it comes back and runs. So do the
        jobs waiting for a fetch cap's slot (their key lists, ready ring and limits); jobs
        running meanwhile keep their slots until they finish."""
        keys = self.ctx.keys
        redis = self.ctx.redis
        lists = list(redis.scan_iter(match=keys.key_list_pattern(self.name), count=1000))
        lists += redis.scan_iter(match=keys.cap_list_pattern(self.name), count=1000)
        pipe = redis.pipeline(transaction=True)
        pipe.llen(self.key)
        pipe.zcard(keys.prio(self.name))
        pipe.unlink(self.key, keys.prio(self.name), keys.key_holders(self.name),
                    keys.key_leases(self.name),
                    keys.cap_ring(self.name), keys.cap_limits(self.name), *lists)
        pipe.srem(keys.queues, self.name)
        replies = pipe.execute()
        return int(replies[0]) + int(replies[1])

    def class_counts(self, max_scan: int | None = DEFAULT_MAX_SCAN) -> ClassCounts:
        """Jobs per class among the first ``max_scan`` entries from the one that runs next."""
        counts: Counter[str] = Counter()
        scanned = 0
        for record in run_order(self.ctx, self.name, 0, max_scan, False):
            counts[record.job_class] += 1
            scanned += 1
        return ClassCounts(self.location, dict(counts), scanned, max(self.size(), scanned))
