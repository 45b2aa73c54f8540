"""The application's own output in a worker's log: the running job on every log record, and
``print`` output as log lines.

A worker sends the root logger to its one log writer
(:func:`rfetch.observability.logs.setup_logging`), so
``logging.getLogger(__name__).info(...)`` inside a job is written at the worker's level, in
order with the job's ``start`` and ``done`` lines. :class:`JobContext` adds the running job's
jid, class and queue to those records (a ``contextvars`` variable, so each thread, and each
asyncio task, sees its own job); :class:`PrintToLog` turns ``sys.stdout`` into log lines of
the ``stdout`` logger (Celery's ``worker_redirect_stdouts``), so a ``print`` also carries
the job and comes after its ``start`` line.
"""

from __future__ import annotations

import contextvars
import io
import logging
import threading
from typing import TextIO

PRINT_LOGGER = "stdout"
"""The logger whose records ``print`` output becomes (level INFO)."""


class JobContext(logging.Filter):
    """The job the current thread (or asyncio task) is running, added to log records.

    Give one instance to the log handler (:func:`rfetch.observability.logs.setup_logging`) and to
    the
    :class:`rfetch.worker.processor.Processor`, which calls :meth:`enter` for each job. A
    record that already carries job fields (rfetch's own per-job lines) keeps them.
    """

    def __init__(self) -> None:
        super().__init__()
        self._current: contextvars.ContextVar[tuple[str, str, str] | None] = (
            contextvars.ContextVar("rfetch_job", default=None)
        )

    def enter(self, job_class: str, jid: str, queue: str) -> contextvars.Token[
        tuple[str, str, str] | None
    ]:
        """Mark ``job_class`` / ``jid`` / ``queue`` as the running job of this context.

        Returns:
            The token that :meth:`leave` takes.
        """
        return self._current.set((job_class, jid, queue))

    def leave(self, token: contextvars.Token[tuple[str, str, str] | None]) -> None:
        """Undo the :meth:`enter` that returned ``token``."""
        self._current.reset(token)

    def current(self) -> tuple[str, str, str] | None:
        """``(job_class, jid, queue)`` of the running job, or None between jobs."""
        return self._current.get()

    def filter(self, record: logging.LogRecord) -> bool:
        """Add ``job_class``, ``jid`` and ``queue`` to ``record`` while a job runs; never
        drops a record."""
        running = self._current.get()
        if running is not None and getattr(record, "jid", None) is None:
            record.job_class, record.jid, record.queue = running
        return True


class PrintToLog(io.TextIOBase):
    """A ``sys.stdout`` replacement that logs each complete line at INFO on ``logger``.

    Partial writes (``print("a", end="")``) are kept per thread until a newline or
    :meth:`flush`, so lines of concurrent jobs never mix. Binary writes through ``buffer``
    and ``fileno()`` (a subprocess given ``sys.stdout``) still reach the original stream.

    Args:
        logger: where lines go (normally the ``stdout`` logger).
        original: the stream being replaced.
    """

    def __init__(self, logger: logging.Logger, original: TextIO) -> None:
        super().__init__()
        self.logger = logger
        self.original = original
        self._partial = threading.local()

    @property
    def buffer(self) -> object:
        """The original stream's binary buffer (writes there are not logged)."""
        return getattr(self.original, "buffer", None)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.original, "encoding", None) or "utf-8"

    def fileno(self) -> int:
        return self.original.fileno()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        """Log every complete line of ``text`` (after what this thread wrote before)."""
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        pending: str = getattr(self._partial, "text", "") + text
        *lines, rest = pending.split("\n")
        self._partial.text = rest
        for line in lines:
            self.logger.info("%s", line.rstrip("\r"))
        return len(text)

    def flush(self) -> None:
        """Log this thread's unfinished line, if any."""
        rest: str = getattr(self._partial, "text", "")
        if rest:
            self._partial.text = ""
            self.logger.info("%s", rest)
