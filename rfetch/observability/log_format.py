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

    def _time(self, created: float) -> str:
        second = int(created)
        if second != self._second:  # strftime once a second, not once a line
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((created - second) * 1000):03d}Z"

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
        elapsed = "" if event.elapsed_ms is None else f" elapsed={event.elapsed_ms}ms"
        return (
            f"{self._time(event.created)} pid={pid} tid={event.thread:x} "
            f"class={event.job_class} jid={event.jid}{elapsed} INFO: {event.message}"
        )


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

