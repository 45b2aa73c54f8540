"""Log formats: Sidekiq-like text lines or one JSON object per line."""

from __future__ import annotations

import json
import logging
import queue
import sys
import time
from logging.handlers import QueueHandler, QueueListener

JOB_FIELDS = ("job_class", "jid", "queue", "elapsed_ms")


def _context(record: logging.LogRecord) -> dict[str, object]:
    return {f: getattr(record, f) for f in JOB_FIELDS if getattr(record, f, None) is not None}


class TextFormatter(logging.Formatter):
    """``2026-11-22T07:33:31.123Z pid=1 tid=7f2a class=app.Job jid=... INFO: start``."""

    _second = -1
    _stamp = ""

    def format(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._second:  # strftime once a second, not once a line
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        stamp = self._stamp
        # record.thread / record.process: formatting runs in the listener thread.
        tid = f"{record.thread or 0:x}"
        parts = [f"{stamp}.{int(record.msecs):03d}Z pid={record.process} tid={tid}"]
        ctx = _context(record)
        if "job_class" in ctx:
            parts.append(f"class={ctx['job_class']}")
        if "jid" in ctx:
            parts.append(f"jid={ctx['jid']}")
        if "elapsed_ms" in ctx:
            parts.append(f"elapsed={ctx['elapsed_ms']}ms")
        line = " ".join(parts) + f" {record.levelname}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


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
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class HandOffHandler(QueueHandler):
    """A QueueHandler that hands the record over as it is.

    The standard one formats the message and copies the record in the calling thread,
    which cost a worker thread more than the rest of a no-op job (issue #4's profile). Here
    the listener thread does all the formatting; rfetch's records carry only immutable
    values, so nothing changes between the hand-over and the formatting.
    """

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record


def setup_logging(verbose: bool, json_logs: bool) -> QueueListener:
    """Send rfetch's logs to stderr, INFO (or DEBUG with ``verbose``), text or JSON.

    Records go through the standard library's QueueHandler to a QueueListener thread that
    formats and writes them, so a processor thread never waits for stderr or for another
    thread's write (that lock cost half the throughput, issue #4).

    Returns:
        The started listener; call ``stop()`` before exit to flush it.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_logs else TextFormatter())
    records: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    listener = QueueListener(records, handler)
    root = logging.getLogger("rfetch")
    root.handlers[:] = [HandOffHandler(records)]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
    listener.start()
    return listener
