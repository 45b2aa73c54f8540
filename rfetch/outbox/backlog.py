"""What the faces show of an outbox: its backlog (rows committed, not yet relayed) and the
row of one jid (``rfetch explain``)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rfetch.outbox.connection import Database, connect


@dataclass(frozen=True)
class Backlog:
    """An outbox's backlog.

    Attributes:
        size: rows waiting for the relay.
        oldest_age: seconds since the oldest row was written (0.0 when none).
        parked: rows Redis refused ``max_attempts`` times, left for an operator.
    """

    size: int
    oldest_age: float
    parked: int


@dataclass(frozen=True)
class OutboxRow:
    """The outbox row of one jid (``rfetch explain``).

    Attributes:
        id: the row's id; queue: its queue; at: run time (epoch s) or None;
        created_at: when written (epoch s); attempts, last_error: Redis's refusals.
    """

    id: int
    queue: str
    at: float | None
    created_at: float
    attempts: int
    last_error: str | None


def backlog(db: Database, max_attempts: int = 5, now: float | None = None) -> Backlog:
    """The backlog of the outbox ``db`` reaches (committed rows only).

    Args:
        max_attempts: the relays' ``max_attempts`` (rows refused that often are parked).
        now: the time, epoch seconds (default ``time.time()``).
    """
    count, oldest = db.execute(db.dialect.backlog)[0]
    parked = db.execute(
        f"SELECT COUNT(*) FROM rfetch_outbox WHERE attempts >= {int(max_attempts)}"
    )[0][0]
    now = time.time() if now is None else now
    age = max(0.0, now - float(oldest)) if oldest is not None else 0.0
    return Backlog(int(count), age, int(parked))


def find(db: Database, jid: str) -> OutboxRow | None:
    """The committed outbox row of ``jid``, or None."""
    rows = db.execute(db.dialect.find(), (jid,))
    if not rows:
        return None
    rid, queue, at, created_at, attempts, last_error = rows[0]
    return OutboxRow(int(rid), str(queue), at, float(created_at), int(attempts), last_error)


def read_backlog(url: str, max_attempts: int = 5) -> Backlog:
    """:func:`backlog` of the outbox at ``url``, on a connection opened and closed here.

    Raises:
        ConfigError: a bad URL or a missing driver; the driver's errors.
    """
    db = connect(url, autocommit=True)
    try:
        return backlog(db, max_attempts)
    finally:
        db.close()


def read_row(url: str, jid: str) -> OutboxRow | None:
    """:func:`find` on a connection to ``url`` opened and closed here."""
    db = connect(url, autocommit=True)
    try:
        return find(db, jid)
    finally:
        db.close()
