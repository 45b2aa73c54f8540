"""``RFETCH["outbox"] = True``: every push is a row of ``rfetch_outbox`` written through
Django's connection, in the surrounding ``transaction.atomic()`` (docs/outbox.md)."""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async
from django.db import connections

from rfetch.outbox.connection import Database
from rfetch.outbox.context import OutboxWriter
from rfetch.push.buffer import BufferedJob
from rfetch.push.sink import AsyncSend, Send


class OutboxSink:
    """A sink (:mod:`rfetch.push.sink`) that inserts each push as an outbox row through the
    connection of ``database``: inside ``transaction.atomic()`` the rows commit or roll back
    with the transaction (a rolled-back savepoint drops its own); outside one they commit at
    once. ``rfetch relay`` moves committed rows to Redis, each job once. Redis is never
    written here (``send`` is not called).

    Args:
        database: the database alias whose connection writes the rows (default
            ``"default"``); its database must have the table (``manage.py migrate``).
    """

    def __init__(self, database: str = "default") -> None:
        self.database = database

    def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool] | None:
        """Insert ``jobs`` as rows; each counts as written.

        Raises:
            django.db.DatabaseError: the insert failed (no table: run ``manage.py
                migrate``); inside ``atomic()`` the transaction is then broken, as for any
                failed statement.
        """
        return OutboxWriter(Database.of(connections[self.database])).write(jobs)

    async def awrite(
        self, jobs: Sequence[BufferedJob], send: Send, asend: AsyncSend
    ) -> list[bool] | None:
        """:meth:`write` from asyncio code, in the thread of the ``atomic()`` block
        (``sync_to_async(thread_sensitive=True)``, as the on-commit sink does)."""
        held = list(jobs)
        written: list[bool] | None = await sync_to_async(self.write, thread_sensitive=True)(
            held, send
        )
        return written
