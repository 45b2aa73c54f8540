"""Enqueue in the application's own transaction: ``with rfetch.outbox.using(conn):``.

Inside the block, every push of this thread or asyncio task made through a
:class:`rfetch.Client` (``perform_async``, ``perform_in``, ``perform_at``, ``perform_bulk``,
``Client.push`` and ``push_bulk``) inserts one row per job into ``rfetch_outbox`` through
``conn``, in whatever transaction ``conn`` is in, instead of writing to Redis. The caller
commits or rolls back: a rolled-back transaction leaves nothing; a committed one leaves rows
the relay (``rfetch relay``) pushes to Redis, each job once, even if the process dies the
next instant.

A connection in autocommit mode commits each row at once: the push is then as durable as
the database when ``perform_async`` returns. rfetch does not look at whether a transaction
is open and push straight to Redis when none is: one path for every push keeps the jobs of
a block in order, and a row committed is a job that survives Redis being down.

The block is a ``contextvars`` variable: each thread and each asyncio task sees its own;
nested blocks use the innermost connection. A test mode of :mod:`rfetch.testing` (fake,
inline) takes precedence: its pushes never reach the database. The jobs of a batch's
``jobs()`` block go to Redis with their batch when the block ends, not to the outbox.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from rfetch.outbox.connection import Database
from rfetch.push.buffer import BufferedJob


class OutboxWriter:
    """Writes serialised jobs as outbox rows through one connection.

    Args:
        database: the application's connection and its dialect.
    """

    def __init__(self, database: Database) -> None:
        self.database = database

    def write(self, jobs: Sequence[BufferedJob]) -> list[bool]:
        """Insert one row per job (in push order) in the connection's transaction; every
        job counts as written (a unique job's lock is decided when the relay pushes it).

        Raises:
            the driver's errors (the database refused the insert): the caller's
            transaction then holds none of these rows if it rolls back.
        """
        now = time.time()
        rows = [(_jid(job.text), job.queue, job.text, job.at, now) for job in jobs]
        self.database.executemany(self.database.dialect.insert, rows)
        return [True] * len(jobs)


def _jid(text: str) -> str:
    """The jid of a serialised payload."""
    jid: Any = json.loads(text).get("jid")
    return str(jid)


_OUTBOX: ContextVar[OutboxWriter | None] = ContextVar("rfetch_outbox", default=None)


def current() -> OutboxWriter | None:
    """The writer of the ``using`` block open in this context, or None."""
    return _OUTBOX.get()


@contextmanager
def using(conn: Any) -> Iterator[OutboxWriter]:
    """Send this context's pushes to the outbox table through ``conn`` for the block (see
    the module docstring).

    Args:
        conn: a DB-API connection (psycopg 3 or 2, sqlite3, PyMySQL) or a SQLAlchemy
            ``Connection`` or ``Session``, whose transaction the caller commits or rolls
            back. The table must exist (``rfetch outbox migrate``, the Django migration).

    Raises:
        ConfigError: ``conn`` is not a connection of a supported database.
    """
    token = _OUTBOX.set(OutboxWriter(Database.of(conn)))
    try:
        yield _OUTBOX.get()  # type: ignore[misc]
    finally:
        _OUTBOX.reset(token)
