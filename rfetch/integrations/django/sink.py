"""Pushes deferred to the commit of the surrounding database transaction."""

from __future__ import annotations

from collections.abc import Sequence

from asgiref.sync import sync_to_async
from django.db import transaction

from rfetch.push.buffer import BufferedJob
from rfetch.push.sink import AsyncSend, Send


class OnCommitSink:
    """A sink (:mod:`rfetch.push.sink`) that holds pushes made inside ``transaction.atomic()``
    until the transaction commits (``transaction.on_commit``), and drops them if it rolls
    back, so a job never runs before the rows it reads exist, nor for rows that never will
    (Sidekiq 7's transaction-aware client). Outside a transaction jobs are written at once.

    ``aperform_async`` and the other asyncio pushes follow the same rule (:meth:`awrite`).

    A deferred push returns its jid at once; a unique job's lock is then decided at commit
    (``perform_async`` cannot return None for it). A push that fails at commit time (the
    push buffer is full while Redis is down) raises from the commit, as Django raises
    errors of ``on_commit`` callbacks.

    Args:
        database: the database alias whose transactions count (default ``"default"``).
    """

    def __init__(self, database: str = "default") -> None:
        self.database = database

    def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool] | None:
        """Write ``jobs`` now, or at commit when a transaction is open."""
        if self._deferred(jobs, send):
            return [True] * len(jobs)
        return send(jobs)

    async def awrite(
        self, jobs: Sequence[BufferedJob], send: Send, asend: AsyncSend
    ) -> list[bool] | None:
        """:meth:`write` for the asyncio client: ``asend`` now, or ``send`` at commit.

        Django's transactions are synchronous and its connections belong to a thread, so
        ``atomic()`` is open in a sync thread, and asyncio code inside it runs through
        ``async_to_sync`` (in another thread, with its own event loop). The look at the
        transaction therefore runs through ``sync_to_async(thread_sensitive=True)``, which
        asgiref runs in the thread that called ``async_to_sync``, the thread of the
        ``atomic()`` block; ``on_commit`` registers there, and ``send`` runs at its commit.
        Outside a transaction the jobs are written by ``asend`` on the event loop.
        """
        held = list(jobs)
        if await sync_to_async(self._deferred, thread_sensitive=True)(held, send):
            return [True] * len(held)
        return await asend(held)

    def _deferred(self, jobs: Sequence[BufferedJob], send: Send) -> bool:
        """Hand ``jobs`` to ``send`` at commit if a transaction is open in this thread;
        whether one was."""
        if not transaction.get_connection(self.database).in_atomic_block:
            return False
        held = list(jobs)
        transaction.on_commit(lambda: send(held), using=self.database)
        return True
