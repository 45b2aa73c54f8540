"""What the outbox relay sleeps on between rounds.

On PostgreSQL, :class:`NotifyWaiter` listens on the ``rfetch_outbox`` channel, which the
table's insert trigger notifies when a transaction that inserted rows commits, so a
committed job reaches Redis within milliseconds. Elsewhere :class:`PollWaiter` sleeps
``poll_interval`` seconds. Both wake at once when the relay is told to stop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from rfetch.outbox.connection import Database
from rfetch.outbox.dialects import CHANNEL


class Waiter(Protocol):
    """The relay's sleep between rounds."""

    def wait(self, timeout: float, stop: threading.Event) -> None:
        """Return when rows may have been committed, ``stop`` is set, or after ``timeout``
        seconds at most (the poll interval, or NOTIFY's safety net).

        Raises:
            the driver's errors (the relay logs them and backs off).
        """

    def close(self) -> None:
        """Release what the waiter holds (its connection)."""


class PollWaiter:
    """Sleeps the poll interval (SQLite, MySQL: no notification reaches the relay)."""

    def wait(self, timeout: float, stop: threading.Event) -> None:
        stop.wait(timeout)

    def close(self) -> None:
        return None


class NotifyWaiter:
    """PostgreSQL ``LISTEN rfetch_outbox`` on an autocommit connection of its own.

    A notification that arrives while the relay works is kept by the connection, so none
    is missed between rounds. Its sleeps last at most ``timeout`` and at most ``slice_s``
    seconds each, so a stop is seen soon.

    Args:
        connect: opens an autocommit connection (called again after an error).
        slice_s: the longest single wait, seconds.
    """

    def __init__(self, connect: Callable[[], Database], slice_s: float = 0.5) -> None:
        self.connect = connect
        self.slice_s = slice_s
        self._database: Database | None = None

    def _listening(self) -> Database:
        if self._database is None:
            database = self.connect()
            database.execute(f"LISTEN {CHANNEL}")
            self._database = database
        return self._database

    def wait(self, timeout: float, stop: threading.Event) -> None:
        """Wait for a NOTIFY, ``stop`` or ``timeout`` seconds (see the class docstring).

        Raises:
            psycopg errors: the connection was lost (the next wait reconnects).
        """
        if stop.is_set():
            return
        database = self._listening()
        try:
            for _ in database.conn.notifies(timeout=min(timeout, self.slice_s), stop_after=1):
                break
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        database, self._database = self._database, None
        if database is not None:
            database.close()
