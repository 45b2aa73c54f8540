"""Server middleware: no job runs on a stale database connection."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.db import connections

from rfetch.jobs.middleware import AsyncNext
from rfetch.jobs.payload import Payload

if TYPE_CHECKING:
    from rfetch.jobs.job import Job


def close_old_connections() -> None:
    """Close every connection that errored or outlived ``CONN_MAX_AGE``, and arm the
    ``CONN_HEALTH_CHECKS`` check of the next use, as Django does at the start and end of
    each request. A connection inside ``atomic()`` (a job run inline by a test) is left
    alone: closing it would end the transaction."""
    for connection in connections.all(initialized_only=True):
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()


class CloseOldConnections:
    """Runs :func:`close_old_connections` before and after each job (what Django does
    around a request, and django-rq and Celery's Django fix-up around a job), so a
    database restart, a failover or a connection closed by the server costs no job."""

    def __call__(
        self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]
    ) -> None:
        close_old_connections()
        try:
            call_next()
        finally:
            close_old_connections()

    async def acall(self, job: Job, payload: Payload, queue: str, call_next: AsyncNext) -> None:
        """The same for an async job: in the thread where ``sync_to_async`` runs the ORM
        calls of async code (Django's connections are per thread)."""
        close = sync_to_async(close_old_connections)
        await close()
        try:
            await call_next()
        finally:
            await close()
