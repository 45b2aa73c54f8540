"""Databases for the outbox tests: a PostgreSQL database of this pytest session (random
name, created on 127.0.0.1:5432 and dropped at the end; skipped with the reason where there
is no server or no psycopg), a MariaDB one likewise (127.0.0.1:3306, PyMySQL), and SQLite
files in a test's own folder."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from rfetch.outbox.connection import Database, connect
from rfetch.outbox.service import migrate

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
MYSQL_ADMIN = "mysql://root@127.0.0.1:3306/test"


def answers(port: int) -> bool:
    """Whether something listens on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The URL of a PostgreSQL database of this session, with the outbox table."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install psycopg)")
    if not answers(5432):
        pytest.skip("no PostgreSQL at 127.0.0.1:5432")
    name = f"rfetch_outbox_{secrets.token_hex(6)}"
    admin = connect(PG_ADMIN, autocommit=True)
    admin.execute(f"CREATE DATABASE {name}")
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    migrate(url)
    yield url
    admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    admin.close()


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """The session's PostgreSQL outbox, emptied before the test."""
    db = connect(pg_database, autocommit=True)
    db.execute("DELETE FROM rfetch_outbox")
    db.close()
    return pg_database


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of a new SQLite file with the outbox table."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    migrate(url)
    return url


@pytest.fixture(scope="session")
def mysql_database() -> Iterator[str]:
    """The URL of a MariaDB/MySQL database of this session, with the outbox table."""
    pytest.importorskip("pymysql", reason="PyMySQL is not installed (pip install pymysql)")
    if not answers(3306):
        pytest.skip("no MariaDB/MySQL at 127.0.0.1:3306")
    name = f"rfetch_outbox_{secrets.token_hex(6)}"
    admin = connect(MYSQL_ADMIN, autocommit=True)
    admin.execute(f"CREATE DATABASE {name}")
    url = f"mysql://root@127.0.0.1:3306/{name}"
    migrate(url)
    yield url
    admin.execute(f"DROP DATABASE {name}")
    admin.close()


def rows(url: str) -> list[tuple[str, str]]:
    """(jid, queue) of every committed outbox row at ``url``, oldest first."""
    db: Database = connect(url, autocommit=True)
    try:
        return [(str(j), str(q)) for j, q in db.execute(
            "SELECT jid, queue FROM rfetch_outbox ORDER BY id")]
    finally:
        db.close()
