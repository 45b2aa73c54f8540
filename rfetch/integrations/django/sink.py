"""Pushes deferred to the commit of the surrounding database transaction."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction

from rfetch.push_buffer import BufferedJob
from rfetch.sink import Send


class OnCommitSink:
    """A sink (:mod:`rfetch.sink`) that holds pushes made inside ``transaction.atomic()``
    until the transaction commits (``transaction.on_commit``), and drops them if it rolls
    back, so a job never runs before the rows it reads exist, nor for rows that never will
    (Sidekiq 7's transaction-aware client). Outside a transaction jobs are written at once.

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
        if not transaction.get_connection(self.database).in_atomic_block:
            return send(jobs)
        held = list(jobs)
        transaction.on_commit(lambda: send(held), using=self.database)
        return [True] * len(held)
