"""Where a client keeps jobs it could not push while Redis was unreachable.

Sidekiq Pro's reliable push keeps the last 1,000 pushes in process memory, so a restart of
the client process during an outage loses them (its own design notes say so). rfetch has
the same in-memory buffer, and optionally a durable spool: an SQLite file in a directory
you name, shared safely by every process that names it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rfetch.errors import ConfigError

SPOOL_FILE = "rfetch-spool.sqlite3"


@dataclass(frozen=True, slots=True)
class BufferedJob:
    """A serialised job waiting for Redis: its queue, JSON text and run time (or None).

    ``plain`` is True only when whoever encoded ``text`` knows it has no routing field (no
    ordering key, unique lock, tenant, fetch cap or priority: a bulk push of one template,
    :mod:`rfetch.push.bulk_text`), so the write need not search it for them; False (the
    default, and whatever a buffer gives back) means "look".
    """

    queue: str
    text: str
    at: float | None
    plain: bool = field(default=False, compare=False, repr=False)


class PushBuffer(Protocol):
    """First-in, first-out store of jobs waiting for Redis."""

    def __len__(self) -> int: ...

    def extend(self, jobs: Sequence[BufferedJob]) -> None:
        """Add jobs at the end."""

    @contextmanager
    def deliver(self, limit: int) -> Iterator[list[BufferedJob]]:
        """Yield up to ``limit`` jobs from the head; they are removed only if the block
        ends without an exception (so a failed delivery keeps them, in order)."""
        yield []  # pragma: no cover - protocol


class MemoryBuffer:
    """Jobs in process memory (lost if the process exits before Redis is back)."""

    def __init__(self) -> None:
        self._jobs: deque[BufferedJob] = deque()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._jobs)

    def extend(self, jobs: Sequence[BufferedJob]) -> None:
        with self._lock:
            self._jobs.extend(jobs)

    @contextmanager
    def deliver(self, limit: int) -> Iterator[list[BufferedJob]]:
        with self._lock:
            batch = [self._jobs[i] for i in range(min(limit, len(self._jobs)))]
            yield batch
            for _ in batch:
                self._jobs.popleft()


class SpoolBuffer:
    """Jobs in an SQLite file, so they survive a restart of the pushing process.

    Several processes may share one directory: delivery runs inside an IMMEDIATE
    transaction, so one process at a time delivers and a crash after Redis accepted a batch
    but before the rows were deleted re-delivers it (at least once, never lost).

    Args:
        directory: folder for ``rfetch-spool.sqlite3`` (created if missing).

    Raises:
        ConfigError: the folder cannot be created or the file opened.
    """

    def __init__(self, directory: str | Path) -> None:
        folder = Path(directory)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.path = folder / SPOOL_FILE
            with self._connect() as db:
                db.execute(
                    "CREATE TABLE IF NOT EXISTS spool (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                    " queue TEXT NOT NULL, payload TEXT NOT NULL, at REAL)"
                )
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot use push spool folder {str(directory)!r}: {exc}") from exc

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def __len__(self) -> int:
        db = self._connect()
        try:
            return int(db.execute("SELECT COUNT(*) FROM spool").fetchone()[0])
        finally:
            db.close()

    def extend(self, jobs: Sequence[BufferedJob]) -> None:
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "INSERT INTO spool (queue, payload, at) VALUES (?, ?, ?)",
                [(j.queue, j.text, j.at) for j in jobs],
            )
            db.execute("COMMIT")
        finally:
            db.close()

    @contextmanager
    def deliver(self, limit: int) -> Iterator[list[BufferedJob]]:
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            rows = db.execute(
                "SELECT id, queue, payload, at FROM spool ORDER BY id LIMIT ?", (limit,)
            ).fetchall()
            try:
                yield [BufferedJob(queue, payload, at) for _, queue, payload, at in rows]
            except BaseException:
                db.execute("ROLLBACK")
                raise
            if rows:
                db.execute("DELETE FROM spool WHERE id <= ?", (rows[-1][0],))
            db.execute("COMMIT")
        finally:
            db.close()
