"""The database connections the outbox works through: an application's own (a DB-API
connection of psycopg, sqlite3 or PyMySQL, or a SQLAlchemy ``Connection`` or ``Session``),
named by :class:`Database` with its :class:`~rfetch.outbox.dialects.Dialect`; and the relay's
and the CLI's, opened from a URL by :func:`connect`.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from rfetch.errors import ConfigError
from rfetch.outbox.dialects import Dialect, dialect

_DRIVERS = {
    "psycopg": "postgresql",
    "psycopg2": "postgresql",
    "sqlite3": "sqlite",
    "pymysql": "mysql",
    "MySQLdb": "mysql",
    "mariadb": "mysql",
}


@dataclass(frozen=True)
class Database:
    """One connection and its dialect; runs the outbox's statements on it, in whatever
    transaction the connection is in (it never commits or rolls back).

    Attributes:
        conn: a DB-API connection, or a SQLAlchemy Connection.
        dialect: its SQL.
        sqlalchemy: whether ``conn`` is a SQLAlchemy Connection (``exec_driver_sql``).
    """

    conn: Any
    dialect: Dialect
    sqlalchemy: bool = False

    @classmethod
    def of(cls, conn: Any) -> Database:
        """The Database of ``conn``: a DB-API connection of psycopg (3 or 2), sqlite3,
        PyMySQL, mysqlclient or MariaDB Connector/Python; a SQLAlchemy ``Connection``; a
        SQLAlchemy ``Session`` (its connection of the current transaction, which
        ``session.commit()`` commits); or a Django connection (``django.db.connection``).

        Raises:
            ConfigError: another kind of object or database.
        """
        if hasattr(conn, "get_bind") and hasattr(conn, "connection"):  # an ORM Session
            conn = conn.connection()
        if hasattr(conn, "exec_driver_sql"):  # a SQLAlchemy Connection
            return cls(conn, dialect(str(conn.dialect.name)), sqlalchemy=True)
        if hasattr(conn, "vendor") and hasattr(conn, "in_atomic_block"):  # Django's
            # Django's cursors take %s on every backend (it turns them into SQLite's ?)
            return cls(conn, replace(dialect(str(conn.vendor)), mark="%s"))
        driver = type(conn).__module__.split(".")[0]
        name = _DRIVERS.get(driver)
        if name is None:
            raise ConfigError(
                f"rfetch.outbox.using takes a DB-API connection (psycopg, sqlite3, PyMySQL) "
                f"or a SQLAlchemy Connection or Session, not {type(conn).__qualname__} "
                f"of {driver}"
            )
        return cls(conn, dialect(name))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (empty for a statement without any)."""
        if self.sqlalchemy:
            result = self.conn.exec_driver_sql(sql, tuple(params))
            return [tuple(row) for row in result.fetchall()] if result.returns_rows else []
        cursor = self.conn.cursor()
        try:
            cursor.execute(sql, tuple(params))
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        finally:
            cursor.close()

    def begin(self) -> None:
        """Open the relay's transaction: on SQLite ``BEGIN IMMEDIATE`` (the database's
        write lock, so relays take turns); elsewhere the first statement opens it."""
        if self.dialect.name == "sqlite":
            self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        """Commit the relay's transaction."""
        if self.dialect.name == "sqlite":
            self.conn.execute("COMMIT")
        else:
            self.conn.commit()

    def rollback(self) -> None:
        """Roll back the relay's transaction (nothing happens when none is open)."""
        if self.dialect.name == "sqlite":
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        else:
            self.conn.rollback()

    def close(self) -> None:
        """Close the connection; errors (a connection already lost) are ignored."""
        with contextlib.suppress(Exception):  # closing a broken connection may fail
            self.conn.close()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement per row of parameters."""
        if not rows:
            return
        if self.sqlalchemy:
            self.conn.exec_driver_sql(sql, [tuple(row) for row in rows])
            return
        cursor = self.conn.cursor()
        try:
            cursor.executemany(sql, [tuple(row) for row in rows])
        finally:
            cursor.close()


def connect(url: str, *, autocommit: bool = False) -> Database:
    """A new connection to the database at ``url``, for the relay and the CLI.

    Args:
        url: ``postgresql://user@host:port/db`` (psycopg 3), ``sqlite:///relative.db`` or
            ``sqlite:////absolute/path.db`` (sqlite3, 30 s busy timeout, transactions opened
            by the caller), ``mysql://user:password@host:port/db`` (PyMySQL).
        autocommit: each statement commits at once (the relay's LISTEN connection, the
            CLI's migrate).

    Raises:
        ConfigError: another scheme, or its driver is not installed.
        the driver's own errors: the database cannot be reached.
    """
    scheme = urlsplit(url).scheme.split("+")[0]
    if scheme in ("postgresql", "postgres"):
        try:
            import psycopg
        except ImportError:
            raise ConfigError(
                "a PostgreSQL outbox needs psycopg: pip install 'psycopg[binary]'"
            ) from None
        return Database(psycopg.connect(url, autocommit=autocommit), dialect("postgresql"))
    if scheme == "sqlite":
        path = url.split("://", 1)[1]
        path = path[1:] if path.startswith("/") else path
        conn = sqlite3.connect(path or ":memory:", timeout=30, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        return Database(conn, dialect("sqlite"))
    if scheme in ("mysql", "mariadb"):
        return Database(_mysql(url, autocommit), dialect("mysql"))
    raise ConfigError(
        f"the outbox's database URL must start with postgresql://, sqlite:/// or mysql://, "
        f"not {url.split('://')[0]!r}://"
    )


def _mysql(url: str, autocommit: bool) -> Any:
    """A PyMySQL connection to ``url``."""
    try:
        import pymysql
    except ImportError:
        raise ConfigError("a MySQL/MariaDB outbox needs PyMySQL: pip install pymysql") from None
    parts = urlsplit(url)
    return pymysql.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=parts.path.lstrip("/") or None,
        autocommit=autocommit,
    )
