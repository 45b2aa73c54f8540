"""The outbox table's SQL, one :class:`Dialect` per database (PostgreSQL, SQLite,
MySQL/MariaDB): its schema (``rfetch outbox migrate``, the Django migration and the
SQLAlchemy/Alembic snippet in docs/outbox.md all use :func:`schema`), and the statements the
enqueue side (:mod:`rfetch.outbox.context`) and the relay (:mod:`rfetch.outbox.relay`) run.

The table, ``rfetch_outbox``: one row per job committed by the application and not yet
relayed to Redis.

- ``id``: ascending key; the relay takes rows in ``id`` order (roughly commit order).
- ``jid``, ``queue``: the job's; ``jid`` names the relay's idempotency marker in Redis and is
  what ``rfetch explain JID`` looks up.
- ``payload``: the job's JSON text, exactly as it goes to Redis (Sidekiq's format).
- ``at``: the run time of a scheduled job, float epoch seconds, NULL to run now.
- ``created_at``: when the row was written, float epoch seconds (the backlog's oldest age).
- ``attempts``, ``last_error``: pushes Redis refused for this row alone (a key of another
  type, a bad payload): after ``max_attempts`` the relay leaves the row for an operator
  (``rfetch outbox status`` shows it); a row is never dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rfetch.errors import ConfigError

TABLE = "rfetch_outbox"
CHANNEL = "rfetch_outbox"
"""PostgreSQL's NOTIFY channel, notified by the table's insert trigger at commit."""

COLUMNS = "id, jid, queue, payload, at"
"""The columns the relay claims, in :class:`rfetch.outbox.relay.Row` order."""


@dataclass(frozen=True)
class Dialect:
    """One database's outbox SQL.

    Attributes:
        name: ``postgresql``, ``sqlite`` or ``mysql`` (MariaDB too).
        mark: the DB-API placeholder (``%s`` or ``?``).
        create: the statements that create the table, its index and (PostgreSQL) the
            NOTIFY trigger; each may run again (``IF NOT EXISTS`` / ``OR REPLACE``).
        lock: the suffix that makes the claim lock its rows and pass rows other relays
            hold (``FOR UPDATE SKIP LOCKED``); "" where the whole database is locked
            instead (SQLite: the relay's ``BEGIN IMMEDIATE``).
        deletes_returning: the claim may be a ``DELETE ... RETURNING`` (PostgreSQL).
    """

    name: str
    mark: str
    create: tuple[str, ...]
    lock: str
    deletes_returning: bool = False

    @property
    def insert(self) -> str:
        """The INSERT of one job (jid, queue, payload, at, created_at)."""
        m = self.mark
        return (
            f"INSERT INTO {TABLE} (jid, queue, payload, at, created_at) "
            f"VALUES ({m}, {m}, {m}, {m}, {m})"
        )

    def claim(self, limit: int, max_attempts: int) -> str:
        """The SELECT of the next ``limit`` rows to relay (fewer than ``max_attempts``
        refusals), oldest first, locked for this relay's transaction."""
        return (
            f"SELECT {COLUMNS} FROM {TABLE} WHERE attempts < {int(max_attempts)} "
            f"ORDER BY id LIMIT {int(limit)} {self.lock}"
        ).rstrip()

    def delete(self, count: int) -> str:
        """The DELETE of ``count`` relayed rows by id, one statement."""
        return f"DELETE FROM {TABLE} WHERE id IN ({', '.join([self.mark] * count)})"

    @property
    def claim_delete(self) -> Callable[[int, int], str] | None:
        """Where the database has it (PostgreSQL), the claim that deletes the rows it
        returns, in one statement (see :meth:`claim`'s arguments); else None."""
        if not self.deletes_returning:
            return None

        def statement(limit: int, max_attempts: int) -> str:
            return (
                f"DELETE FROM {TABLE} WHERE id IN ({self.claim(limit, max_attempts)}) "
                f"RETURNING {COLUMNS}"
            ).replace(f"SELECT {COLUMNS} FROM", "SELECT id FROM", 1)

        return statement

    @property
    def refuse(self) -> str:
        """The UPDATE that counts one refusal of a row (last_error, id)."""
        m = self.mark
        return f"UPDATE {TABLE} SET attempts = attempts + 1, last_error = {m} WHERE id = {m}"

    @property
    def backlog(self) -> str:
        """Rows waiting, the oldest's created_at, rows left for an operator."""
        return f"SELECT COUNT(*), MIN(created_at) FROM {TABLE}"

    def find(self) -> str:
        """The rows of one jid (id, queue, at, created_at, attempts, last_error)."""
        return (
            f"SELECT id, queue, at, created_at, attempts, last_error FROM {TABLE} "
            f"WHERE jid = {self.mark}"
        )


POSTGRESQL = Dialect(
    "postgresql",
    "%s",
    (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGSERIAL PRIMARY KEY, jid TEXT NOT NULL, "
        "queue TEXT NOT NULL, payload TEXT NOT NULL, at DOUBLE PRECISION, "
        "created_at DOUBLE PRECISION NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
        "last_error TEXT)",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_jid ON {TABLE} (jid)",
        f"CREATE OR REPLACE FUNCTION {TABLE}_notify() RETURNS trigger LANGUAGE plpgsql AS "
        f"$$ BEGIN PERFORM pg_notify('{CHANNEL}', ''); RETURN NULL; END $$",
        f"CREATE OR REPLACE TRIGGER {TABLE}_notify AFTER INSERT ON {TABLE} "
        f"FOR EACH STATEMENT EXECUTE FUNCTION {TABLE}_notify()",
    ),
    "FOR UPDATE SKIP LOCKED",
    deletes_returning=True,
)

SQLITE = Dialect(
    "sqlite",
    "?",
    (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "jid TEXT NOT NULL, queue TEXT NOT NULL, payload TEXT NOT NULL, at REAL, "
        "created_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT)",
        f"CREATE INDEX IF NOT EXISTS {TABLE}_jid ON {TABLE} (jid)",
    ),
    "",
)

MYSQL = Dialect(
    "mysql",
    "%s",
    (
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
        "jid VARCHAR(64) NOT NULL, queue VARCHAR(255) NOT NULL, payload LONGTEXT NOT NULL, "
        "at DOUBLE NULL, created_at DOUBLE NOT NULL, attempts INT NOT NULL DEFAULT 0, "
        f"last_error TEXT NULL, INDEX {TABLE}_jid (jid))",
    ),
    "FOR UPDATE SKIP LOCKED",
)

DIALECTS = {d.name: d for d in (POSTGRESQL, SQLITE, MYSQL)}


def dialect(name: str) -> Dialect:
    """The dialect called ``name`` (``postgresql``/``postgres``, ``sqlite``, ``mysql``,
    ``mariadb``).

    Raises:
        ConfigError: another database.
    """
    key = {"postgres": "postgresql", "mariadb": "mysql"}.get(name, name)
    found = DIALECTS.get(key)
    if found is None:
        raise ConfigError(
            f"the outbox supports PostgreSQL, SQLite and MySQL/MariaDB, not {name!r}"
        )
    return found


def schema(name: str) -> str:
    """The SQL that creates the outbox table on database ``name`` (see :func:`dialect`),
    one statement per line group, each ending in ``;`` (for docs and migrations).

    Raises:
        ConfigError: another database.
    """
    return "".join(f"{statement};\n" for statement in dialect(name).create)
