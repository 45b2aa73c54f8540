"""Log line formats: Sidekiq-like text lines, or one JSON object per line, for the
application's log records and for rfetch's per-job events (``start``/``done``)."""

from __future__ import annotations

import json
import logging
import time
from typing import NamedTuple

JOB_FIELDS = ("job_class", "jid", "queue", "elapsed_ms")


class JobEvent(NamedTuple):
    """A per-job log line (``start``/``done``) as plain values, handed to the writer thread
    instead of a ``logging.LogRecord``: building a record (caller lookup, thread and process
    names) cost a worker thread about a third of a no-op job (profiled)."""

    created: float
    thread: int
    message: str
    job_class: str
    jid: str
    queue: str
    elapsed_ms: float | None
    logger: str


def _context(record: logging.LogRecord) -> dict[str, object]:
    return {f: getattr(record, f) for f in JOB_FIELDS if getattr(record, f, None) is not None}


def _traceback(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    """The record's traceback and stack text ("" when it has none); ``exc_text`` when the
    hand-off already formatted it (see :meth:`HandOffHandler.prepare`)."""
    parts = []
    if record.exc_text:
        parts.append(record.exc_text)
    elif record.exc_info:
        parts.append(formatter.formatException(record.exc_info))
    if record.stack_info:
        parts.append(formatter.formatStack(record.stack_info))
    return "\n".join(parts)


class TextFormatter(logging.Formatter):
    """``2026-11-22T07:33:31.123Z pid=1 tid=7f2a class=app.Job jid=... INFO: start``."""

    _second = -1
    _stamp = ""
    _milli = -1
    _time_text = ""

    def __init__(self) -> None:
        super().__init__()
        self._prefixes: dict[tuple[int, int], str] = {}
        """(pid, thread id) -> ``pid=... tid=...``: a per-job line's fixed part."""

    def _time(self, created: float) -> str:
        milli = int(created * 1000)
        if milli == self._milli:  # a busy writer formats many lines per millisecond
            return self._time_text
        second = milli // 1000
        if second != self._second:  # strftime once a second, not once a line
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        self._milli = milli
        self._time_text = f"{self._stamp}.{milli - second * 1000:03d}Z"
        return self._time_text

    def format(self, record: logging.LogRecord) -> str:
        # record.thread / record.process: formatting runs in the writer thread.
        parts = [f"{self._time(record.created)} pid={record.process} tid={record.thread or 0:x}"]
        ctx = _context(record)
        if "job_class" in ctx:
            parts.append(f"class={ctx['job_class']}")
        if "jid" in ctx:
            parts.append(f"jid={ctx['jid']}")
        if "elapsed_ms" in ctx:
            parts.append(f"elapsed={ctx['elapsed_ms']}ms")
        line = " ".join(parts) + f" {record.levelname}: {record.getMessage()}"
        trace = _traceback(self, record)
        return f"{line}\n{trace}" if trace else line

    def format_event(self, event: JobEvent, pid: int) -> str:
        """The same line as :meth:`format` for a per-job event (level INFO)."""
        prefix = self._prefixes.get((pid, event.thread))
        if prefix is None:
            if len(self._prefixes) > 10_000:  # threads come and go: bounded
                self._prefixes.clear()
            prefix = self._prefixes[(pid, event.thread)] = f" pid={pid} tid={event.thread:x} class="
        if event.elapsed_ms is None:
            return (f"{self._time(event.created)}{prefix}{event.job_class} jid={event.jid} "
                    f"INFO: {event.message}")
        return (f"{self._time(event.created)}{prefix}{event.job_class} jid={event.jid} "
                f"elapsed={event.elapsed_ms}ms INFO: {event.message}")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, pid, tid, lvl, msg and the job fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": record.created,
            "pid": record.process,
            "tid": f"{record.thread or 0:x}",
            "lvl": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_context(record))
        trace = _traceback(self, record)
        if trace:
            entry["exc"] = trace
        return json.dumps(entry, default=str)

    def format_event(self, event: JobEvent, pid: int) -> str:
        """The same object as :meth:`format` for a per-job event (level INFO)."""
        entry: dict[str, object] = {
            "ts": event.created,
            "pid": pid,
            "tid": f"{event.thread:x}",
            "lvl": "INFO",
            "logger": event.logger,
            "msg": event.message,
            "job_class": event.job_class,
            "jid": event.jid,
            "queue": event.queue,
        }
        if event.elapsed_ms is not None:
            entry["elapsed_ms"] = event.elapsed_ms
        return json.dumps(entry, default=str)

