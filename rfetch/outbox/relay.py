"""The outbox relay: moves committed outbox rows to Redis, each job once.

One round (:meth:`Relay.relay_batch`), in one database transaction: claim up to
``batch_size`` rows, oldest first (``SELECT ... FOR UPDATE SKIP LOCKED`` on MySQL, so
several relays take different rows; on PostgreSQL the same inside one ``DELETE ...
RETURNING``; on SQLite ``BEGIN IMMEDIATE``, so relays take turns), push them to Redis in one
``push_once.lua`` call, delete them (PostgreSQL: already done), commit.

Exactly once: ``push_once.lua`` writes the jobs and a marker per jid
(``rfetch:outbox:pushed:<jid>``, TTL ``marker_ttl``) in one atomic call, and writes nothing
if any marker is there. A relay that dies after the push and before its delete commits
leaves its rows to the next relay (the database drops a dead session's locks); that relay's
push finds the markers, skips those jobs and deletes the rows. After a commit the markers
are deleted (the rows are gone, so nothing can push those jobs again); the TTL only bounds
what a relay that died just then leaves behind. A relay paused (SIGSTOP, a frozen VM) for
longer than ``marker_ttl`` while holding rows could push them twice: the default is a day.

Redis unreachable: the round rolls back, the rows stay, the relay backs off and retries. A
row Redis refuses on its own (a key of another type on its way, a payload it cannot take) is
counted in ``attempts`` with ``last_error``; after ``max_attempts`` it stays in the table
for an operator (``rfetch outbox status``), and the relay goes on with the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from redis.exceptions import ResponseError

from rfetch.guard import ThreadGuard
from rfetch.outbox.connection import Database
from rfetch.outbox.listener import Waiter
from rfetch.push.buffer import BufferedJob
from rfetch.push.delivery import outgoing
from rfetch.store.connection import REDIS_DOWN
from rfetch.store.outbox_commands import OutboxCommands

log = logging.getLogger("rfetch.outbox")

_WHOLE_REDIS = ("OOM", "READONLY", "LOADING", "BUSY", "MASTERDOWN", "NOREPLICAS", "CLUSTERDOWN")
"""Reply errors about Redis itself, not about one row: the round is retried later."""


DELETE_CHUNK = 500
"""Ids per DELETE statement (SQLite's oldest builds take 999 parameters at most)."""


class Row(NamedTuple):
    """One claimed outbox row (:data:`rfetch.outbox.dialects.COLUMNS` order)."""

    id: int
    jid: str
    queue: str
    payload: str
    at: float | None


@dataclass(frozen=True)
class RelaySettings:
    """How a relay works.

    Attributes:
        batch_size: rows per round (one transaction, one Redis call), >= 1.
        marker_ttl: seconds a pushed job's marker lives when its relay dies before
            deleting it (see the module docstring), >= 1.
        max_attempts: refusals of a row by Redis after which it is left for an operator.
        poll_interval: seconds between two looks at an idle table where no notification
            wakes the relay (SQLite, MySQL); on PostgreSQL the longest sleep between
            NOTIFYs (a safety net).
    """

    batch_size: int = 1000
    marker_ttl: float = 86400.0
    max_attempts: int = 5
    poll_interval: float = 0.05


class Relay:
    """Moves outbox rows to Redis (see the module docstring).

    Args:
        connect: opens the relay's own database connection (called again after an error).
        commands: ``push_once.lua`` on the Redis the jobs go to.
        waiter: what the relay sleeps on between rounds (a NOTIFY listener, or a timer).
        settings: batch size, marker TTL, attempts, poll interval.
    """

    def __init__(
        self,
        connect: Callable[[], Database],
        commands: OutboxCommands,
        waiter: Waiter,
        settings: RelaySettings | None = None,
    ) -> None:
        self.connect = connect
        self.commands = commands
        self.waiter = waiter
        self.settings = settings or RelaySettings()
        self._database: Database | None = None
        self.relayed = 0

    def relay_batch(self) -> int:
        """One round: claim, push, delete, commit. Returns the rows claimed (relayed or
        counted as refused).

        On PostgreSQL the claim is the delete (``DELETE ... RETURNING`` of rows locked with
        ``SKIP LOCKED``, one round trip); the transaction stays open over the push, so a
        failed push rolls the rows back. When Redis refuses some rows on their own, the
        round rolls back, then deletes the rows it pushed and counts the refusals in a
        transaction of its own (a relay dying in between leaves the pushed rows with their
        markers: the next round deletes them without pushing them again).

        Raises:
            redis and driver errors: the round was rolled back; the rows stay.
        """
        db = self._database = self._database or self.connect()
        settings = self.settings
        claim = db.dialect.claim_delete or db.dialect.claim
        db.begin()
        try:
            rows = sorted(Row(*r) for r in db.execute(claim(settings.batch_size,
                                                            settings.max_attempts)))
            refused = self._push(rows) if rows else {}
            done = [row for row in rows if row.id not in refused]
            if refused:  # the claim may have deleted the refused rows: start again
                db.rollback()
                db.begin()
                db.executemany(db.dialect.refuse, [(e, rid) for rid, e in refused.items()])
            if refused or db.dialect.claim_delete is None:
                for start in range(0, len(done), DELETE_CHUNK):
                    ids = [row.id for row in done[start:start + DELETE_CHUNK]]
                    db.execute(db.dialect.delete(len(ids)), ids)
            db.commit()
        except BaseException:
            self._drop_database()
            raise
        self.relayed += len(done)
        try:
            self.commands.forget([row.jid for row in done])
        except REDIS_DOWN as exc:  # the markers expire with their TTL
            log.debug("outbox markers left to their TTL: %s", exc)
        return len(rows)

    def _push(self, rows: Sequence[Row]) -> dict[int, str]:
        """Push ``rows`` once each; the ids of rows Redis refused on their own, with why.

        Raises:
            REDIS_DOWN errors, and reply errors about Redis itself (``_WHOLE_REDIS``).
        """
        ttl_ms = max(1, int(self.settings.marker_ttl * 1000))
        pending = list(rows)
        while pending:
            jobs = outgoing([BufferedJob(r.queue, r.payload, r.at) for r in pending])
            try:
                result = self.commands.push_once(jobs, [r.jid for r in pending], ttl_ms)
            except ResponseError as exc:
                if str(exc).split(" ", 1)[0] in _WHOLE_REDIS:
                    raise
                if len(pending) == 1:
                    log.error("Redis refused outbox row %d (jid %s): %s",
                              pending[0].id, pending[0].jid, exc)
                    return {pending[0].id: str(exc)}
                refused: dict[int, str] = {}
                for row in pending:  # find the row(s) at fault, one call each
                    refused.update(self._push([row]))
                return refused
            if not result.seen:
                return {}
            seen = set(result.seen)
            pending = [row for i, row in enumerate(pending) if i not in seen]
        return {}

    def _drop_database(self) -> None:
        """Roll back and close the connection after an error; the next round reconnects."""
        db, self._database = self._database, None
        if db is None:
            return
        try:
            db.rollback()
        except Exception as exc:
            log.debug("rollback after a failed round failed too: %s", exc)
        db.close()

    def run(self, stop: threading.Event) -> None:
        """Relay until ``stop`` is set: rounds back to back while full batches come, else
        sleep on the waiter. Every error is logged (once per streak) and retried after a
        back-off; the loop never ends on an error."""
        guard = ThreadGuard("outbox relay", log, redis=self.commands.commands.redis, cap=5.0)
        while not stop.is_set():
            try:
                claimed = self.relay_batch()
            except Exception as exc:
                stop.wait(guard.failed(exc))
                continue
            guard.succeeded()
            if claimed >= self.settings.batch_size:
                continue
            try:
                self.waiter.wait(self.settings.poll_interval, stop)
            except Exception as exc:
                stop.wait(guard.failed(exc))
        self._drop_database()
        self.waiter.close()


def describe(settings: RelaySettings, database: Any) -> str:
    """One line naming the relay's settings, for its start log line."""
    return (
        f"outbox relay on {database}: batches of {settings.batch_size}, "
        f"poll {settings.poll_interval} s, marker TTL {settings.marker_ttl:g} s"
    )
