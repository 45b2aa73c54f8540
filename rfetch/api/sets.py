"""The scheduled set, the retry set and the dead set (morgue): paging, filters, actions.

Paging reads rank windows (``ZRANGE start stop WITHSCORES``: O(log N + page) at any depth),
and a score window is turned into ranks with two ``ZCOUNT`` calls, so a set of 1,000,000
jobs pages as fast as a small one. Filters and the retry-count sort examine entries in
chunks, bounded by ``max_scan``.

Actions follow Sidekiq's ``SortedEntry``: *retry* pushes the job to its queue with
``retry_count`` lowered by one (so the manual retry does not use up an attempt), *add to
queue* pushes it unchanged, *kill* moves it to the dead set (trimmed as the worker trims
it), *delete* removes it. Every move is one ``api_move.lua`` call: ``ZREM`` and the push
happen together, and only if this call removed the entry, so a job the poller moved
meanwhile is not pushed twice.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import ClassVar

from .context import Context, Found, collect_page, zrange_scored
from .job_filter import JobFilter
from .records import (
    CHUNK,
    DEFAULT_MAX_SCAN,
    ActionResult,
    ClassCounts,
    JobRecord,
    Page,
)
from .set_moves import act

ACTIONS = ("retry", "add_to_queue", "delete", "kill")
"""Every action a set may offer (the dead set offers all but ``kill``)."""
SORTS = ("time", "retry_count")



class JobSet:
    """One sorted set of jobs (Sidekiq's ``JobSet``).

    Args:
        ctx: the API context.
        name: ``schedule``, ``retry`` or ``dead`` (also the record location).
        key: its Redis key.
    """

    actions: ClassVar[tuple[str, ...]] = ACTIONS

    def __init__(self, ctx: Context, name: str, key: str) -> None:
        self.ctx = ctx
        self.name = name
        self.key = key

    def size(self) -> int:
        """Entries in the set (``ZCARD``)."""
        return int(self.ctx.redis.zcard(self.key))

    # -- reading -------------------------------------------------------------------------

    def page(
        self,
        offset: int = 0,
        limit: int = 25,
        *,
        sort: str = "time",
        reverse: bool = False,
        job_filter: JobFilter | None = None,
        min_score: float | None = None,
        max_score: float | None = None,
        max_scan: int | None = DEFAULT_MAX_SCAN,
    ) -> Page:
        """One page of jobs.

        Args:
            offset: entries to skip in the order asked for (``Page.next_offset``).
            limit: most jobs returned.
            sort: ``"time"`` (by score: run time, next retry, or death) or
                ``"retry_count"`` (most retried first; ties by score).
            reverse: latest score first (``time``), or fewest retries first
                (``retry_count``).
            job_filter: only jobs that pass it.
            min_score, max_score: a score window (float epoch seconds, inclusive).
            max_scan: bound on the entries examined by a filter or the ``retry_count``
                sort (``Page.complete`` is False when it stopped the scan); None for none.

        Raises:
            ValueError: an unknown sort, ``limit < 1`` or ``offset < 0``.
        """
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
        if limit < 1 or offset < 0:
            raise ValueError("limit must be >= 1 and offset >= 0")
        lo, hi = self._window(min_score, max_score)
        total = max(hi - lo + 1, 0)
        filtered = job_filter is not None and not job_filter.empty
        active = job_filter if filtered else None
        if sort == "retry_count":
            return self._page_by_retry_count(offset, limit, reverse, active, lo, hi, max_scan)
        bound = max_scan if filtered else limit
        records = self.ctx.iter_zset(self.key, self.name, lo, hi, offset, reverse, bound)
        return collect_page(
            records, offset=offset, limit=limit, total=total, job_filter=active, max_scan=bound
        )

    def _window(self, min_score: float | None, max_score: float | None) -> tuple[int, int]:
        """Ranks ``[lo, hi]`` of the entries scored within the window."""
        pipe = self.ctx.redis.pipeline(transaction=False)
        pipe.zcount(self.key, "-inf", "+inf" if min_score is None else f"({min_score!r}")
        pipe.zcount(self.key, "-inf", "+inf" if max_score is None else repr(max_score))
        below, upto = pipe.execute()
        lo = 0 if min_score is None else int(below)
        return lo, int(upto) - 1

    def _page_by_retry_count(
        self,
        offset: int,
        limit: int,
        reverse: bool,
        job_filter: JobFilter | None,
        lo: int,
        hi: int,
        max_scan: int | None,
    ) -> Page:
        # Lowkiq's "worst first" view. Redis has no index on retry_count: examine up to
        # max_scan entries in chunks, keeping only the best offset + limit in a heap.
        keep = offset + limit
        heap: list[tuple[int, float, int, JobRecord]] = []
        scanned = matched = 0
        for record in self.ctx.iter_zset(self.key, self.name, lo, hi, 0, False, max_scan):
            scanned += 1
            if job_filter is not None and not job_filter.matches(record):
                continue
            matched += 1
            count = record.retry_count if record.retry_count is not None else -1
            score = record.score or 0.0
            # Larger tuples are shown first; the heap drops the smallest. Ties: earlier
            # score, then scan order (reversed as a whole with ``reverse``).
            if reverse:
                item = (-count, score, scanned, record)
            else:
                item = (count, -score, -scanned, record)
            if len(heap) < keep:
                heapq.heappush(heap, item)
            else:
                heapq.heappushpop(heap, item)
        ordered = [item[3] for item in sorted(heap, key=lambda i: i[:3], reverse=True)]
        jobs = ordered[offset:keep]
        total = max(hi - lo + 1, 0)
        more = matched > keep
        return Page(
            jobs=jobs,
            total=total,
            offset=offset,
            next_offset=keep if more else None,
            scanned=scanned,
            complete=scanned >= total,
        )

    def scan(
        self,
        job_filter: JobFilter | None = None,
        max_scan: int | None = DEFAULT_MAX_SCAN,
        reverse: bool = False,
    ) -> Iterator[JobRecord]:
        """Jobs passing ``job_filter``, by score, examining at most ``max_scan`` entries."""
        size = self.size()
        for record in self.ctx.iter_zset(self.key, self.name, 0, size - 1, 0, reverse, max_scan):
            if job_filter is None or job_filter.matches(record):
                yield record

    def find(self, jid: str, max_scan: int | None = None) -> Found:
        """Entries with this jid, searched on the server (``api_find.lua``) in windows of
        a few thousand, at most ``max_scan`` entries (None: the whole set)."""
        return self.find_all([jid], max_scan)

    def find_all(self, jids: Iterable[str], max_scan: int | None = None) -> Found:
        """Entries with any of these jids, in one server-side pass."""
        return self.ctx.find(self.key, "zset", list(jids), self.name, max_scan)

    def fetch(self, score: float, jid: str) -> JobRecord | None:
        """The entry with this exact score and jid (O(log N); Sidekiq Web's key for a job
        is its score and jid), or None."""
        for record in self.at_score(score):
            if record.jid == jid:
                return record
        return None

    def at_score(self, score: float) -> list[JobRecord]:
        """Every entry scored exactly ``score`` (``ZRANGEBYSCORE score score``: O(log N)),
        with its rank; the web UI names an entry by its score and a digest of its bytes,
        which also reaches entries that are not jobs."""
        pipe = self.ctx.redis.pipeline(transaction=False)
        pipe.zrangebyscore(self.key, repr(score), repr(score), withscores=True)
        pipe.zcount(self.key, "-inf", f"({score!r}")
        entries, below = pipe.execute()
        return [
            JobRecord.parse(raw, self.name, score=float(found), position=int(below) + i)
            for i, (raw, found) in enumerate(entries)
        ]

    def class_counts(self, max_scan: int | None = DEFAULT_MAX_SCAN) -> ClassCounts:
        """Jobs per class among the ``max_scan`` lowest-scored entries."""
        counts: Counter[str] = Counter()
        scanned = 0
        for record in self.scan(None, max_scan):
            counts[record.job_class] += 1
            scanned += 1
        return ClassCounts(self.name, dict(counts), scanned, max(self.size(), scanned))

    def clear(self) -> int:
        """Delete every entry (``UNLINK``); returns how many there were."""
        pipe = self.ctx.redis.pipeline(transaction=True)
        pipe.zcard(self.key)
        pipe.unlink(self.key)
        return int(pipe.execute()[0])

    # -- actions -------------------------------------------------------------------------

    def retry(
        self, targets: Iterable[JobRecord | str], max_scan: int | None = None
    ) -> ActionResult:
        """Push jobs to their queue now, with a fresh ``enqueued_at`` and ``retry_count``
        lowered by one (Sidekiq's ``SortedEntry#retry``). Targets are records or jids."""
        return self.apply("retry", targets, max_scan)

    def add_to_queue(
        self, targets: Iterable[JobRecord | str], max_scan: int | None = None
    ) -> ActionResult:
        """Push jobs to their queue now, with a fresh ``enqueued_at`` and nothing else
        changed (Sidekiq's ``SortedEntry#add_to_queue``)."""
        return self.apply("add_to_queue", targets, max_scan)

    def delete(
        self, targets: Iterable[JobRecord | str], max_scan: int | None = None
    ) -> ActionResult:
        """Remove jobs (``ZREM`` of the exact entry)."""
        return self.apply("delete", targets, max_scan)

    def apply(
        self, action: str, targets: Iterable[JobRecord | str], max_scan: int | None = None
    ) -> ActionResult:
        """Apply ``action`` to records or jids.

        Jids are looked up in one server-side pass (``api_find.lua``) over at most
        ``max_scan`` entries (None: the whole set). A record acts on its exact stored entry
        (no lookup), so a page's records can be passed straight back.

        Raises:
            ValueError: an action this set does not offer (``kill`` on the dead set).
        """
        self._check_action(action)
        result = ActionResult(action)
        records: list[JobRecord] = []
        jids: list[str] = []
        for target in targets:
            if isinstance(target, str):
                jids.append(target)
            else:
                records.append(target)
        if jids:
            found = self.find_all(jids, max_scan)
            result.scanned, result.complete = found.scanned, found.complete
            records.extend(found.records)
            seen = {r.jid for r in found.records}
            result.missing.extend(j for j in dict.fromkeys(jids) if j not in seen)
        for start in range(0, len(records), CHUNK):
            self._act(action, records[start : start + CHUNK], result)
        return result

    def apply_matching(
        self,
        action: str,
        job_filter: JobFilter | None = None,
        max_scan: int | None = None,
    ) -> ActionResult:
        """Apply ``action`` to every job passing ``job_filter`` (all of them when None).

        The set is walked from the highest rank down in windows of :data:`CHUNK`, as
        Sidekiq's ``SortedSet#each`` does, so removing what was just read never shifts an
        entry not yet read. At most ``max_scan`` entries are examined (None: no bound).
        Entries added while it runs may be missed.
        """
        self._check_action(action)
        result = ActionResult(action)
        top = self.size() - 1
        while top >= 0 and (max_scan is None or result.scanned < max_scan):
            count = CHUNK if max_scan is None else min(CHUNK, max_scan - result.scanned)
            first = max(0, top - count + 1)
            items = zrange_scored(self.ctx.redis, self.key, first, top)
            if not items:  # the set shrank meanwhile: nothing left below
                top = -1
                break
            result.scanned += len(items)
            chosen = []
            for raw, score in reversed(items):
                record = JobRecord.parse(raw, self.name, score=float(score))
                if job_filter is None or job_filter.matches(record):
                    chosen.append(record)
            self._act(action, chosen, result)
            top = first - 1
        result.complete = top < 0
        return result

    def _check_action(self, action: str) -> None:
        if action not in self.actions:
            raise ValueError(
                f"the {self.name} set offers {', '.join(self.actions)}, not {action!r}"
            )

    def _act(self, action: str, records: list[JobRecord], result: ActionResult) -> None:
        act(self.ctx, self.key, action, records, result)


class ScheduledSet(JobSet):
    """Jobs to run later (``schedule``); score = run time. ``retry`` and ``add_to_queue``
    both run them now; ``kill`` sends them to the dead set."""

    def kill(
        self, targets: Iterable[JobRecord | str], max_scan: int | None = None
    ) -> ActionResult:
        """Move jobs to the dead set, trimmed as the worker trims it."""
        return self.apply("kill", targets, max_scan)


class RetrySet(JobSet):
    """Failed jobs awaiting their next try (``retry``); score = next retry time."""

    def kill(
        self, targets: Iterable[JobRecord | str], max_scan: int | None = None
    ) -> ActionResult:
        """Move jobs to the dead set, trimmed as the worker trims it."""
        return self.apply("kill", targets, max_scan)


class DeadSet(JobSet):
    """The morgue (``dead``); score = time of death. Its jobs can be retried, put back
    on their queue unchanged, or deleted."""

    actions: ClassVar[tuple[str, ...]] = ("retry", "add_to_queue", "delete")
