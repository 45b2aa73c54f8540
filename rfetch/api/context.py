"""What every part of the admin API shares: the Redis client, the key names, the Lua
scripts (:class:`rfetch.store.commands.Commands`), and the bounded, chunked searches that
keep it from loading a whole big list or set."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Literal

from redis import Redis

from rfetch.config import Config
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys

from .job_filter import JobFilter
from .records import CHUNK, JobRecord, Page

FIND_WINDOW = 5000
"""Entries one ``api_find.lua`` call examines (a few milliseconds of Redis time)."""

Kind = Literal["list", "zset"]


@dataclass
class Found:
    """Result of a search by jid.

    Attributes:
        records: entries whose payload's ``jid`` is one of those asked for.
        scanned: entries examined.
        complete: False when the bound stopped the search before the end.
    """

    records: list[JobRecord] = field(default_factory=list)
    scanned: int = 0
    complete: bool = True


@dataclass(frozen=True)
class Context:
    """Redis client, Config, key names and the Lua scripts."""

    redis: Redis
    config: Config
    keys: Keys
    commands: Commands

    @classmethod
    def build(cls, config: Config, redis: Redis) -> Context:
        """Register the scripts on ``redis`` (no round trip until first use)."""
        keys = Keys(config.namespace)
        return cls(redis, config, keys, Commands(redis, keys))

    def redis_time(self) -> float:
        """Redis's clock (``TIME``), float epoch seconds: what the poller also uses."""
        seconds, micros = self.redis.time()
        return float(seconds) + micros / 1_000_000

    def find(
        self,
        key: str,
        kind: Kind,
        jids: Collection[str],
        location: str,
        max_scan: int | None,
    ) -> Found:
        """Find entries by jid, on the server, window by window (``api_find.lua``).

        Args:
            key: a list (positions counted from the right end, 0 = runs next) or a sorted
                set (rank by score).
            kind: ``"list"`` or ``"zset"``.
            jids: the jids looked for.
            location: :attr:`JobRecord.location` of the records built.
            max_scan: most entries examined; None for no bound.

        Returns:
            The matching records, with ``position`` and, for sorted sets, ``score``.
        """
        found = Found()
        wanted = set(jids)
        if not wanted:
            return found
        start = 0
        while max_scan is None or start < max_scan:
            window = FIND_WINDOW if max_scan is None else min(FIND_WINDOW, max_scan - start)
            reply = self.commands.api_find(key, kind, start, window, sorted(wanted))
            examined = reply.examined
            found.scanned += examined
            for position, entry, score in reply.matches:
                record = JobRecord.parse(entry, location, score=score, position=position)
                if record.jid in wanted:
                    found.records.append(record)
            if examined < window:
                return found
            start += examined
        found.complete = self._size(key, kind) <= start
        return found

    def _size(self, key: str, kind: Kind) -> int:
        return int(self.redis.llen(key) if kind == "list" else self.redis.zcard(key))

    def iter_list(
        self, key: str, location: str, start: int, max_scan: int | None, newest_first: bool
    ) -> Iterator[JobRecord]:
        """Entries of a list in windows of :data:`CHUNK`, from ``start``.

        Positions in the record count from the right end (0 = runs next). With
        ``newest_first`` the walk starts at the left end (the newest push) and ``start``
        counts from there.
        """
        offset = start
        while max_scan is None or offset - start < max_scan:
            count = CHUNK if max_scan is None else min(CHUNK, max_scan - (offset - start))
            if newest_first:
                pipe = self.redis.pipeline(transaction=False)
                pipe.lrange(key, offset, offset + count - 1)
                pipe.llen(key)
                items, length = pipe.execute()
                for i, raw in enumerate(items):
                    yield JobRecord.parse(raw, location, position=length - 1 - (offset + i))
            else:
                items = self.redis.lrange(key, -(offset + count), -(offset + 1))
                for i, raw in enumerate(reversed(items)):
                    yield JobRecord.parse(raw, location, position=offset + i)
            if len(items) < count:
                return
            offset += count

    def iter_zset(
        self,
        key: str,
        location: str,
        lo: int,
        hi: int,
        start: int,
        reverse: bool,
        max_scan: int | None,
    ) -> Iterator[JobRecord]:
        """Entries of a sorted set with ranks in ``[lo, hi]``, in windows of :data:`CHUNK`,
        skipping ``start`` entries in the chosen order (ascending score, or descending with
        ``reverse``). Each window is one ``ZRANGE ... WITHSCORES`` by rank: O(log N + window),
        however deep the page."""
        done = 0
        pos = start
        while pos <= hi - lo and (max_scan is None or done < max_scan):
            count = CHUNK if max_scan is None else min(CHUNK, max_scan - done)
            count = min(count, hi - lo - pos + 1)
            if reverse:
                first, last = hi - pos - count + 1, hi - pos
            else:
                first, last = lo + pos, lo + pos + count - 1
            items = zrange_scored(self.redis, key, first, last)
            if reverse:
                items.reverse()
            for i, (raw, score) in enumerate(items):
                rank = last - i if reverse else first + i
                yield JobRecord.parse(raw, location, score=float(score), position=rank)
            if len(items) < count:
                return
            pos += count
            done += count


def zrange_scored(redis: Redis, key: str, first: int, last: int) -> list[tuple[bytes, float]]:
    """``ZRANGE key first last WITHSCORES`` by rank, as (entry, score) pairs."""
    items: list[tuple[bytes, float]] = redis.zrange(  # type: ignore[assignment]
        key, first, last, withscores=True
    )
    return items


def queue_names_of(value: bytes | str | None) -> list[str]:
    """The JSON list of queue names stored in ``rfetch:identities`` (empty if unreadable)."""
    if value is None:
        return []
    try:
        names = json.loads(value)
    except ValueError:
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def collect_page(
    records: Iterator[JobRecord],
    *,
    offset: int,
    limit: int,
    total: int,
    job_filter: JobFilter | None,
    max_scan: int | None,
) -> Page:
    """Take up to ``limit`` records passing ``job_filter`` from ``records`` (which starts at
    ``offset`` in the order asked for and is bounded by ``max_scan``)."""
    jobs: list[JobRecord] = []
    scanned = 0
    for record in records:
        scanned += 1
        if job_filter is None or job_filter.matches(record):
            jobs.append(record)
            if len(jobs) >= limit:
                break
    end = offset + scanned
    bound_hit = max_scan is not None and scanned >= max_scan and len(jobs) < limit
    complete = not (bound_hit and end < total)
    return Page(
        jobs=jobs,
        total=total,
        offset=offset,
        next_offset=end if end < total and scanned > 0 else None,
        scanned=scanned,
        complete=complete,
    )
