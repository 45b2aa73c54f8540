"""What the admin API returns: job records, pages, action results, class counts (the
filters are :mod:`rfetch.api.job_filter`).

A :class:`JobRecord` wraps one entry of a queue, a private list, a sorted set (scheduled,
retry, dead) or a busy thread, exactly as stored, so an action can name the very bytes it
acts on (``LREM`` / ``ZREM`` match whole values). Payloads written by Ruby Sidekiq 6/7/8 read
the same way as rfetch's: timestamps go through :func:`rfetch.jobs.payload.epoch_seconds`
(Sidekiq 8 writes milliseconds), and ActiveJob wrappers show the wrapped class.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from rfetch.jobs.options import priority_of
from rfetch.jobs.payload import Routing, epoch_seconds
from rfetch.worker.retry import decompress_backtrace

ACTIVEJOB_WRAPPER = "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"
"""The class Rails' ActiveJob pushes; the real job class is in ``wrapped`` or
``args[0]["job_class"]`` (Sidekiq's ``JobRecord#display_class``)."""

DEFAULT_MAX_SCAN = 100_000
"""Entries a filtered, sorted or jid search examines per queue or set unless told otherwise."""

CHUNK = 1000
"""Entries read per round trip when scanning (LRANGE / ZRANGE windows)."""


def to_bytes(value: bytes | str) -> bytes:
    """A Redis value as bytes (clients built with ``decode_responses=True`` give str)."""
    return value if isinstance(value, bytes) else value.encode("utf-8")


def to_text(value: bytes | str) -> str:
    """A Redis value as text (invalid UTF-8 replaced)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def parse_payload(raw: bytes | str) -> dict[str, Any] | None:
    """The JSON object in ``raw``, or None when it is not valid JSON or not an object."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return value if isinstance(value, dict) else None


def dump_payload(payload: dict[str, Any]) -> str:
    """Compact JSON, as rfetch's client and Ruby's ``JSON.generate`` write it."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class JobRecord:
    """One job as stored in Redis.

    Attributes:
        raw: the entry exactly as stored (what LREM/ZREM must match).
        location: where it was read: ``queue:<q>``, ``schedule``, ``retry``, ``dead``,
            ``running`` (a busy thread's work entry) or ``private`` (a private list).
        score: for sorted sets, the score: run time (scheduled), next retry time (retry) or
            time of death (dead), float epoch seconds.
        position: for queues, how many jobs run before it (0 = next); for sorted sets, its
            rank in score order (0 = lowest score).
    """

    raw: bytes
    location: str
    score: float | None = None
    position: int | None = None

    @cached_property
    def payload(self) -> dict[str, Any] | None:
        """The parsed JSON object, or None for an entry that is not one (such entries reach
        the dead set "as fetched"). Parsed on first use, so a filter can reject an entry
        from its bytes alone."""
        return parse_payload(self.raw)

    @classmethod
    def parse(
        cls,
        raw: bytes | str,
        location: str,
        score: float | None = None,
        position: int | None = None,
    ) -> JobRecord:
        """Build a record from a stored entry."""
        return cls(to_bytes(raw), location, score, position)

    @cached_property
    def routing(self) -> Routing | None:
        """The payload's routing fields (ordering key, unique lock, tenant, ...), or None
        for a plain job or an invalid entry (:meth:`rfetch.jobs.payload.Routing.parse`)."""
        return Routing.parse(self.raw)

    def _get(self, name: str) -> Any:
        return None if self.payload is None else self.payload.get(name)

    @property
    def valid(self) -> bool:
        """Whether the entry is a JSON object (invalid entries can only be deleted)."""
        return self.payload is not None

    @property
    def value(self) -> str:
        """The entry as text (for display; invalid UTF-8 replaced)."""
        return to_text(self.raw)

    @property
    def jid(self) -> str | None:
        """The 24-hex job id (None if the entry has none)."""
        return _str_or_none(self._get("jid"))

    @property
    def payload_class(self) -> str | None:
        """The payload's ``class`` field as pushed (e.g. the ActiveJob wrapper)."""
        return _str_or_none(self._get("class"))

    @property
    def job_class(self) -> str:
        """The class to show: the payload's ``display_class``, else for ActiveJob wrappers
        ``wrapped`` or ``args[0]["job_class"]``, else ``class`` (Sidekiq's
        ``JobRecord#display_class``); ``"(invalid)"`` for an entry that is not a job."""
        if self.payload is None:
            return "(invalid)"
        shown = _str_or_none(self.payload.get("display_class"))
        if shown:
            return shown
        klass = self.payload_class or "(no class)"
        if klass == ACTIVEJOB_WRAPPER:
            wrapped = _str_or_none(self.payload.get("wrapped"))
            if wrapped:
                return wrapped
            first = self.args[0] if self.args else None
            if isinstance(first, dict) and isinstance(first.get("job_class"), str):
                return str(first["job_class"])
            if isinstance(first, str):
                return first
        return klass

    @property
    def args(self) -> list[Any]:
        """The ``args`` array (empty when missing or not an array)."""
        value = self._get("args")
        return value if isinstance(value, list) else []

    @property
    def display_args(self) -> list[Any]:
        """Arguments to show: for ActiveJob wrappers the wrapped job's ``arguments``."""
        args = self.args
        if self.payload_class == ACTIVEJOB_WRAPPER and args and isinstance(args[0], dict):
            inner = args[0].get("arguments")
            if isinstance(inner, list):
                return inner
        return args

    @property
    def queue(self) -> str | None:
        """The payload's ``queue``."""
        return _str_or_none(self._get("queue"))

    @property
    def priority(self) -> int:
        """The job's priority (``priority``; -100..100, higher runs first), 0 when none."""
        return priority_of(self._get("priority"))

    @property
    def created_at(self) -> float | None:
        """When the job was built, float epoch seconds (Sidekiq 8 ms read too)."""
        return epoch_seconds(self._get("created_at"))

    @property
    def enqueued_at(self) -> float | None:
        """When it was last put on a queue, float epoch seconds; None while scheduled."""
        return epoch_seconds(self._get("enqueued_at"))

    @property
    def failed_at(self) -> float | None:
        """Time of the first failure, float epoch seconds."""
        return epoch_seconds(self._get("failed_at"))

    @property
    def retried_at(self) -> float | None:
        """Time of the latest failed retry, float epoch seconds."""
        return epoch_seconds(self._get("retried_at"))

    @property
    def retry_count(self) -> int | None:
        """``retry_count`` (0 after the first failure); None if it never failed."""
        value = self._get("retry_count")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def error_class(self) -> str | None:
        """Class of the last error (``module.Class``)."""
        return _str_or_none(self._get("error_class"))

    @property
    def error_message(self) -> str | None:
        """Message of the last error (truncated to 10,000 characters by the worker)."""
        return _str_or_none(self._get("error_message"))

    @property
    def error_backtrace(self) -> list[str] | None:
        """The stored traceback of the last error, innermost frame first, in Ruby's
        ``file:line:in `method'`` form: Sidekiq's ``error_backtrace`` (base64 of deflated
        JSON), written only for a job with the ``backtrace`` option; None when absent or
        unreadable."""
        text = self._get("error_backtrace")
        if not isinstance(text, str) or not text:
            return None
        try:
            lines = decompress_backtrace(text)
        except (ValueError, TypeError, zlib.error):
            return None
        return [str(line) for line in lines] if isinstance(lines, list) else None

    @property
    def at(self) -> float | None:
        """For sorted-set entries, the score: run time, next retry or death, epoch seconds."""
        return self.score

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (``--json`` output); ``value`` is the stored text."""
        return {
            "jid": self.jid,
            "class": self.job_class,
            "payload_class": self.payload_class,
            "args": self.args,
            "display_args": self.display_args,
            "queue": self.queue,
            "priority": self.priority,
            "location": self.location,
            "position": self.position,
            "score": self.score,
            "created_at": self.created_at,
            "enqueued_at": self.enqueued_at,
            "retry_count": self.retry_count,
            "error_class": self.error_class,
            "error_message": self.error_message,
            "failed_at": self.failed_at,
            "retried_at": self.retried_at,
            "value": self.value,
        }


@dataclass(frozen=True)
class Page:
    """One page of a queue or sorted set.

    Attributes:
        jobs: the records, in the order asked for.
        total: entries in the queue, set, or score window (before filtering).
        offset: where this page started, in the order asked for.
        next_offset: pass it as ``offset`` for the next page; None at the end.
        scanned: entries examined to build the page.
        complete: False when ``max_scan`` stopped a filtered or sorted scan before the end:
            more matches may exist beyond what was examined.
    """

    jobs: list[JobRecord]
    total: int
    offset: int
    next_offset: int | None
    scanned: int
    complete: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "jobs": [j.to_dict() for j in self.jobs],
            "total": self.total,
            "offset": self.offset,
            "next_offset": self.next_offset,
            "scanned": self.scanned,
            "complete": self.complete,
        }


@dataclass
class ActionResult:
    """Outcome of an action on jobs.

    Attributes:
        action: ``retry``, ``add_to_queue``, ``delete`` or ``kill``.
        done: jobs acted on.
        missing: jids asked for that were not found, or records that were gone by the time
            of the action (moved by a worker, the poller or another admin).
        skipped: jids (or ``"(invalid)"``) found but not actionable: an entry that is not a
            job cannot be retried.
        scanned: entries examined to find the jobs.
        complete: False when ``max_scan`` stopped the search before the end.
    """

    action: str
    done: int = 0
    missing: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    scanned: int = 0
    complete: bool = True

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "action": self.action,
            "done": self.done,
            "missing": self.missing,
            "skipped": self.skipped,
            "scanned": self.scanned,
            "complete": self.complete,
        }


@dataclass(frozen=True)
class ClassCounts:
    """Jobs per class in one place.

    Attributes:
        location: ``queue:<q>``, ``schedule``, ``retry``, ``dead`` or ``running``.
        counts: class shown -> jobs, over the entries examined.
        scanned: entries examined.
        total: entries there.
    """

    location: str
    counts: dict[str, int]
    scanned: int
    total: int

    @property
    def complete(self) -> bool:
        """Whether every entry was counted (the scan bound was not hit)."""
        return self.scanned >= self.total

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "location": self.location,
            "counts": self.counts,
            "scanned": self.scanned,
            "total": self.total,
            "complete": self.complete,
        }


def finite_or_none(value: float | None) -> float | None:
    """``value``, with infinities as None (for JSON)."""
    return None if value is None or math.isinf(value) else value
