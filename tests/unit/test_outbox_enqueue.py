"""The outbox's enqueue side without Redis: pushes inside ``rfetch.outbox.using`` are rows in
the caller's transaction (sqlite3 in memory), and bad input is refused clearly."""

from __future__ import annotations

import json
import sqlite3

import pytest

import rfetch
from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.outbox.connection import Database, connect
from rfetch.outbox.dialects import SQLITE, dialect, schema
from rfetch.push.client import Client


@pytest.fixture
def conn() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(schema("sqlite"))
    return conn


def stored(conn: sqlite3.Connection) -> list[tuple[str, str, str, float | None]]:
    return list(conn.execute("SELECT jid, queue, payload, at FROM rfetch_outbox ORDER BY id"))


def test_pushes_are_rows_of_the_callers_transaction(conn: sqlite3.Connection) -> None:
    client = Client(Config())  # never connects: every push goes to the table
    with rfetch.outbox.using(conn):
        client.push("app.Send", [1])
        conn.rollback()
        now = client.push("app.Send", [2], {"queue": "mail"})
        later = client.push("app.Send", [3], at=4_000_000_000.0)
        bulk = client.push_bulk("app.Send", [[4], [5]])
    conn.commit()
    got = stored(conn)
    assert [(jid, queue) for jid, queue, _, _ in got] == [
        (now, "mail"), (later, "default"), (bulk[0], "default"), (bulk[1], "default")
    ]
    payload = json.loads(got[0][2])
    assert (payload["class"], payload["args"], payload["jid"]) == ("app.Send", [2], now)
    assert got[1][3] == 4_000_000_000.0 and "at" not in json.loads(got[1][2])


def test_the_block_ends_with_its_context(conn: sqlite3.Connection) -> None:
    with rfetch.outbox.using(conn) as writer:
        assert rfetch.outbox.current() is writer
    assert rfetch.outbox.current() is None


def test_a_test_mode_takes_precedence(conn: sqlite3.Connection) -> None:
    with rfetch.testing.fake() as queues, rfetch.outbox.using(conn):
        Client(Config()).push("app.Send", [1])
    assert stored(conn) == []
    assert len(queues.jobs(queue="default")) == 1


def test_bad_input_is_refused() -> None:
    with pytest.raises(ConfigError, match="DB-API connection"), rfetch.outbox.using(object()):
        pass
    with pytest.raises(ConfigError, match="not 'oracle'"):
        dialect("oracle")
    with pytest.raises(ConfigError, match="must start with"):
        connect("oracle://x")


def test_dialects() -> None:
    assert dialect("postgres").name == "postgresql" and dialect("mariadb").name == "mysql"
    assert "SKIP LOCKED" in dialect("postgresql").claim(10, 5)
    assert SQLITE.claim(10, 5).endswith("LIMIT 10")
    assert "pg_notify" in schema("postgresql")
    assert Database.of(sqlite3.connect(":memory:")).dialect is SQLITE
