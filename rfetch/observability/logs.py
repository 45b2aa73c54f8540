"""The hand-off of log lines from worker threads to one writer thread, and the set-up of a
process's logging (the line formats are in ``observability/log_format.py``)."""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import queue
import sys
import threading
import time
import traceback
from logging.handlers import QueueHandler

from rfetch.observability.log_format import JobEvent, JsonFormatter, TextFormatter

__all__ = [
    "BUSY_BATCH", "DirectHandler", "HandOffHandler", "Item", "JobEvent", "JobLog",
    "JsonFormatter", "LogWriter", "TextFormatter", "setup_direct_logging", "setup_logging",
]

BUSY_BATCH = 4
"""Lines written in one go from which the log writer counts itself busy."""

BUSY_INTERVAL = 0.02
"""Seconds a busy log writer waits between writes: the most a line is late under load."""

Item = logging.LogRecord | JobEvent | None
"""What travels to the writer thread; None asks it to stop."""


class HandOffHandler(QueueHandler):
    """A QueueHandler that hands the record over as it is.

    The standard one formats the message and copies the record in the calling thread,
    which cost a worker thread more than the rest of a no-op job (profiled). Here
    the writer thread does all the formatting; rfetch's records carry only immutable
    values, so nothing changes between the hand-over and the formatting.

    Two kinds of record are frozen in the calling thread instead: one with a traceback
    (``exc_info``: formatted into ``exc_text`` while its frames are as they were), and,
    with ``eager``, every record (an application's arguments may be objects it changes
    afterwards).

    Args:
        items: the writer's queue.
        eager: freeze every record's message in the calling thread.
    """

    def __init__(self, items: queue.SimpleQueue[Item], eager: bool = False) -> None:
        super().__init__(items)
        self.eager = eager

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        if not (self.eager or record.exc_info):
            return record
        frozen = copy.copy(record)
        frozen.msg = record.getMessage()
        frozen.args = None
        if record.exc_info:
            frozen.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
            frozen.exc_info = None
        return frozen


class LogWriter:
    """The one thread that formats and writes log lines (records and job events, in the
    order they were handed over), writing everything that is waiting with one ``write``
    and one ``flush``.

    A line handed over while the writer is idle is written at once. Under load (a batch of
    ``BUSY_BATCH`` lines or more), the writer waits ``interval`` seconds after each write,
    so lines are written at most that late, in one ``write`` per batch.

    Args:
        items: the queue the HandOffHandler and JobLog put into.
        handler: the stream handler whose stream, formatter and lock are used.
        formatter: the handler's formatter (text or JSON).
        interval: seconds to wait after writing a busy batch (default ``BUSY_INTERVAL``).
    """

    def __init__(
        self,
        items: queue.SimpleQueue[Item],
        handler: logging.StreamHandler,  # type: ignore[type-arg]
        formatter: TextFormatter | JsonFormatter,
        interval: float | None = None,
    ) -> None:
        self.items = items
        self.handler = handler
        self.formatter = formatter
        self.interval = BUSY_INTERVAL if interval is None else interval
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures: set[str] = set()

    def start(self) -> None:
        """Start the writer thread (a daemon: it never keeps the process alive)."""
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="rfetch-log", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Write what is waiting, then end the thread."""
        if self._thread is None:
            return
        self.items.put(None)
        self._stopping.set()
        self._thread.join()
        self._thread = None

    def _run(self) -> None:
        items = self.items
        while True:
            batch = [items.get()]
            while len(batch) < 1000:
                try:
                    batch.append(items.get_nowait())
                except queue.Empty:
                    break
            if not self._write(batch):
                return
            if len(batch) >= BUSY_BATCH:
                # Busy: let the next lines gather instead of being woken for each one. A
                # put with no thread waiting costs a worker thread nothing more, while each
                # wake-up cost it a GIL hand-off (about a sixth of a no-op job).
                self._stopping.wait(self.interval)

    def _write(self, batch: list[Item]) -> bool:
        """Write a batch; False once the stop sentinel is in it. One item that cannot be
        formatted or handled is reported on stderr (once per kind of error) and skipped:
        the writer thread never ends before :meth:`stop`, or every later line is lost."""
        pid = os.getpid()
        lines: list[str] = []
        going = True
        for item in batch:
            if item is None:
                going = False
                continue
            try:
                if isinstance(item, JobEvent):
                    lines.append(self.formatter.format_event(item, pid))
                else:
                    self._flush(lines)
                    lines = []
                    self.handler.handle(item)
            except Exception as exc:
                self._dropped(exc)
        self._flush(lines)
        return going

    def _dropped(self, exc: Exception) -> None:
        kind = type(exc).__name__
        if kind in self._failures:
            return
        self._failures.add(kind)
        with contextlib.suppress(Exception):  # stderr itself is gone: nothing left to tell
            sys.stderr.write(f"rfetch log writer: dropped a line it could not write: {exc!r}\n")

    def _flush(self, lines: list[str]) -> None:
        if not lines:
            return
        handler = self.handler
        with handler.lock or threading.Lock():
            try:
                handler.stream.write("\n".join(lines) + "\n")
                handler.flush()
            except Exception:  # a closed or broken stderr must not kill the thread
                pass


class JobLog:
    """The per-job ``start`` / ``done`` lines, at INFO on ``logger``.

    When rfetch's own logging is in place (:func:`setup_logging`: the ``rfetch`` logger's
    only handler is a HandOffHandler, no filters on the way), a line is handed to the writer
    thread as a :class:`JobEvent` tuple; otherwise (an embedding application configured
    logging itself) it goes through ``logger.info`` with the job fields as ``extra``, so
    handlers and filters see ordinary records.

    Args:
        logger: the job logger (``rfetch.job``).
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self._items = _fast_queue(logger)

    def event(
        self, message: str, job_class: str, jid: str, queue_name: str, elapsed_ms: float | None
    ) -> None:
        """Log one per-job line at INFO (nothing when INFO is off for the logger)."""
        logger = self.logger
        if not logger.isEnabledFor(logging.INFO):
            return
        items = self._items
        if items is not None:
            items.put(
                JobEvent(
                    time.time(),
                    threading.get_ident(),
                    message,
                    job_class,
                    jid,
                    queue_name,
                    elapsed_ms,
                    logger.name,
                )
            )
            return
        extra: dict[str, object] = {"job_class": job_class, "jid": jid, "queue": queue_name}
        if elapsed_ms is not None:
            extra["elapsed_ms"] = elapsed_ms
        logger.info(message, extra=extra)


def _fast_queue(logger: logging.Logger) -> queue.SimpleQueue[Item] | None:
    """The writer's queue if ``logger``'s records go only to one HandOffHandler with no
    filters on the way; else None."""
    current: logging.Logger | None = logger
    while current is not None:
        if current.filters:
            return None
        if current.handlers:
            handlers = current.handlers
            if len(handlers) == 1 and isinstance(handlers[0], HandOffHandler):
                handler = handlers[0]
                if not handler.filters and not current.propagate:
                    return handler.queue  # type: ignore[return-value]
            return None
        current = current.parent if current.propagate else None
    return None


def setup_logging(
    verbose: bool, json_logs: bool, context: logging.Filter | None = None
) -> LogWriter:
    """Send rfetch's logs, and the application's, to stderr at INFO (or DEBUG with
    ``verbose``), text or JSON.

    Records go through a QueueHandler to one writer thread that formats and writes them, so
    a processor thread never waits for stderr or for another thread's write (that lock cost
    half the throughput); per-job lines travel as :class:`JobEvent` tuples. The root logger
    (every application logger that has no handler of its own) goes to the same writer at
    the same level, so its lines come in order with rfetch's; ``context`` (a
    :class:`rfetch.observability.log_context.JobContext`) adds the running job to them. A root
    logger the
    application configured itself (``dictConfig`` in a ``-r`` module, say) is left as it
    is, and one configured later replaces this handler.

    Args:
        verbose: DEBUG instead of INFO.
        json_logs: one JSON object per line instead of text.
        context: a filter for the application's records (the running job's fields).

    Returns:
        The started writer; call ``stop()`` before exit to flush it.
    """
    handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter() if json_logs else TextFormatter()
    handler.setFormatter(formatter)
    items: queue.SimpleQueue[Item] = queue.SimpleQueue()
    writer = LogWriter(items, handler, formatter)
    level = logging.DEBUG if verbose else logging.INFO
    own = logging.getLogger("rfetch")
    own.handlers[:] = [HandOffHandler(items)]
    own.setLevel(level)
    own.propagate = False
    application = HandOffHandler(items, eager=True)
    if context is not None:
        application.addFilter(context)
    _take_root(application, level)
    writer.start()
    return writer


class DirectHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The stderr handler of :func:`setup_direct_logging` (a type of its own, so that
    :func:`setup_logging` knows the root logger's handler is rfetch's, not the
    application's)."""


def _take_root(handler: logging.Handler, level: int) -> None:
    """Make ``handler`` the root logger's (the application's logging) at ``level``, unless
    the application configured the root logger itself (a handler rfetch did not put
    there, e.g. from ``dictConfig`` in a ``-r`` module): that configuration is kept."""
    root = logging.getLogger()
    if all(isinstance(h, (HandOffHandler, DirectHandler)) for h in root.handlers):
        root.handlers[:] = [handler]
        root.setLevel(level)


def setup_direct_logging(verbose: bool, json_logs: bool) -> None:
    """Like :func:`setup_logging`, but written by the logging thread itself, with no writer
    thread: for ``rfetch worker`` until its worker process starts (the ``-r`` imports) and
    for a swarm's parent, which must have no other thread when it forks (each worker
    process then calls :func:`setup_logging` for itself)."""
    handler = DirectHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_logs else TextFormatter())
    level = logging.DEBUG if verbose else logging.INFO
    root = logging.getLogger("rfetch")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    _take_root(handler, level)
