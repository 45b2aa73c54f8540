"""The transactional outbox end to end against a real Redis and real databases: pushes in a
transaction become rows only if it commits, the relay moves them to Redis each once (also
when a relay died after its push), wakes on NOTIFY on PostgreSQL, and leaves a row Redis
refuses for an operator without holding up the others."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.outbox.connection import connect
from rfetch.outbox.relay import Relay, RelaySettings
from rfetch.outbox.service import build_relay
from rfetch.push.buffer import BufferedJob
from rfetch.push.client import Client
from rfetch.push.delivery import outgoing
from tests.support.outbox import mysql_database, pg_database, pg_url, rows, sqlite_url
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

__all__ = ["mysql_database", "pg_database", "pg_url", "sqlite_url"]


@pytest.fixture
def client(config: Config) -> Iterator[Client]:
    client = Client(config)
    previous = rfetch.push.client.DEFAULT.swap(client)
    yield client
    rfetch.push.client.DEFAULT.swap(previous)


def queued_jids(r: redis.Redis, queue: str = "default") -> list[str]:
    return [json.loads(raw)["jid"] for raw in r.lrange(f"queue:{queue}", 0, -1)]


def test_sqlite_rollback_leaves_nothing_commit_leaves_rows(
    client: Client, sqlite_url: str, r: redis.Redis, config: Config
) -> None:
    path = sqlite_url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    with rfetch.outbox.using(conn):
        dropped = client.push("app.Send", [1])
        conn.rollback()
        kept = client.push("app.Send", [2])
        later = client.push("app.Send", [3], at=4_000_000_000.0)
        bulk = client.push_bulk("app.Send", [[4], [5]])
        conn.commit()
    assert r.llen("queue:default") == 0  # nothing reached Redis yet
    assert [jid for jid, _ in rows(sqlite_url)] == [kept, later, *bulk]
    relay = build_relay(config, sqlite_url)
    assert relay.relay_batch() == 4
    assert sorted(queued_jids(r)) == sorted([kept, *bulk])
    assert dropped not in queued_jids(r)
    assert [json.loads(m)["jid"] for m in r.zrange("schedule", 0, -1)] == [later]
    assert rows(sqlite_url) == []
    assert relay.relay_batch() == 0


def test_postgres_transaction_and_relay(client: Client, pg_url: str, r: redis.Redis,
                                        config: Config) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn, rfetch.outbox.using(conn):
        with conn.transaction():
            kept = client.push("app.Send", [1], {"queue": "mail"})
        with pytest.raises(ZeroDivisionError), conn.transaction():
            client.push("app.Send", [2])
            1 / 0  # noqa: B018 - the application's error rolls its transaction back
    assert [jid for jid, _ in rows(pg_url)] == [kept]
    relay = build_relay(config, pg_url)
    assert relay.relay_batch() == 1
    assert queued_jids(r, "mail") == [kept]
    assert r.llen("queue:default") == 0
    assert r.keys("rfetch:outbox:pushed:*") == []  # markers deleted after the commit


def test_relay_that_died_after_its_push_is_not_repeated(
    client: Client, pg_url: str, r: redis.Redis, config: Config
) -> None:
    """A relay pushed the first rows (markers written) and died before deleting them: the
    next relay skips exactly those jobs and pushes the rest."""
    import psycopg

    with psycopg.connect(pg_url) as conn, rfetch.outbox.using(conn):
        jids = client.push_bulk("app.Send", [[i] for i in range(6)])
    relay = build_relay(config, pg_url)
    db = connect(pg_url)
    claimed = db.execute("SELECT id, jid, queue, payload, at FROM rfetch_outbox ORDER BY id")
    db.rollback()
    db.close()
    first = claimed[:3]
    jobs = outgoing([BufferedJob(q, p, a) for _, _, q, p, a in first])
    relay.commands.push_once(jobs, [j for _, j, _, _, _ in first], 60_000)  # the dead relay
    assert relay.relay_batch() == 6
    assert sorted(queued_jids(r)) == sorted(jids)  # each once


def test_push_once_writes_nothing_when_a_marker_exists(config: Config, r: redis.Redis) -> None:
    relay = build_relay(config, "sqlite:///:memory:")
    text = json.dumps({"class": "A", "args": [], "jid": "j1", "queue": "default"})
    job = outgoing([BufferedJob("default", text, None)])
    first = relay.commands.push_once(job, ["j1"], 60_000)
    assert (first.seen, first.refused) == ((), ())
    again = relay.commands.push_once(
        [*job, *outgoing([BufferedJob("default", text.replace("j1", "j2"), None)])],
        ["j1", "j2"], 60_000,
    )
    assert again.seen == (0,)
    assert queued_jids(r) == ["j1"]  # nothing of the second call was written
    assert 0 < r.pttl("rfetch:outbox:pushed:j1") <= 60_000


def test_two_relays_at_once_move_each_row_once(
    client: Client, pg_url: str, r: redis.Redis, config: Config
) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn, rfetch.outbox.using(conn):
        jids = client.push_bulk("app.Send", [[i] for i in range(3000)])
    settings = RelaySettings(batch_size=100)
    relays = [build_relay(config, pg_url, settings) for _ in range(2)]
    stop = threading.Event()
    threads = [threading.Thread(target=relay.run, args=(stop,)) for relay in relays]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: r.llen("queue:default") >= 3000 and not rows(pg_url), 120,
                 "3000 jobs relayed")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert sorted(queued_jids(r)) == sorted(jids)
    assert sum(relay.relayed for relay in relays) == 3000


def test_postgres_relay_wakes_on_notify(client: Client, pg_url: str, r: redis.Redis,
                                        config: Config) -> None:
    """With a poll interval of an hour, only the NOTIFY at commit can wake the relay."""
    import psycopg

    relay = build_relay(config, pg_url, poll=3600.0)
    relay.waiter.slice_s = 3600.0  # type: ignore[attr-defined]
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,))
    thread.start()
    try:
        wait_for(lambda: relay.waiter._database is not None, 30, "the relay listening")  # type: ignore[attr-defined]
        with psycopg.connect(pg_url) as conn, rfetch.outbox.using(conn):
            jid = client.push("app.Send", [1])
        wait_for(lambda: queued_jids(r) == [jid], 60, "the job relayed after its commit")
    finally:
        stop.set()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("NOTIFY rfetch_outbox")  # wake it to see the stop
        thread.join(30)
    assert not thread.is_alive()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_row_redis_refuses_is_left_and_others_go(
    client: Client, database: str, request: pytest.FixtureRequest, r: redis.Redis,
    config: Config
) -> None:
    url = request.getfixturevalue("sqlite_url" if database == "sqlite" else "pg_url")
    r.set("queue:broken", "a string, not a list")
    conn = connect(url).conn
    with rfetch.outbox.using(conn):
        good = client.push("app.Send", [1])
        bad = client.push("app.Send", [2], {"queue": "broken"})
        also = client.push("app.Send", [3])
    if database == "postgresql":  # the relay's sqlite3 connection is in autocommit mode
        conn.commit()
    conn.close()
    relay = build_relay(config, url, RelaySettings(max_attempts=2))
    assert relay.relay_batch() == 3
    assert queued_jids(r) == [also, good]
    assert rows(url) == [(bad, "broken")]  # the others were deleted
    assert relay.relay_batch() == 1
    assert relay.relay_batch() == 0  # refused twice: left for an operator
    assert rows(url) == [(bad, "broken")]
    assert queued_jids(r) == [also, good]
    out = subprocess.run(
        [sys.executable, "-m", "rfetch.cli", "outbox", "status", "--database", url,
         "--json", "--max-attempts", "2"], capture_output=True, text=True, check=True,
    )
    assert json.loads(out.stdout)["parked"] == 1


def test_cli_migrate_and_relay_process(tmp_path: object, config: Config, r: redis.Redis,
                                       client: Client) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    subprocess.run([sys.executable, "-m", "rfetch.cli", "outbox", "migrate", "--database", url],
                   check=True, capture_output=True)
    conn = sqlite3.connect(f"{tmp_path}/cli.db")
    with rfetch.outbox.using(conn):
        jid = client.push("app.Send", [1])
        conn.commit()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rfetch.cli", "relay", "--database", url,
         "--redis-url", config.redis_url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: queued_jids(r) == [jid], 60, "the relay process's push")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert b"1 job(s) relayed" in out


def test_sqlalchemy_session(client: Client, pg_url: str, r: redis.Redis,
                            config: Config) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy", reason="SQLAlchemy is not installed")
    from sqlalchemy.orm import Session

    engine = sqlalchemy.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://"))
    with Session(engine) as session:
        with rfetch.outbox.using(session):
            gone = client.push("app.Send", [1])
        session.rollback()
        with rfetch.outbox.using(session):
            kept = client.push("app.Send", [2])
        session.commit()
    engine.dispose()
    assert [jid for jid, _ in rows(pg_url)] == [kept]
    assert gone != kept


def test_mysql_outbox(client: Client, mysql_database: str, r: redis.Redis,
                      config: Config) -> None:
    db = connect(mysql_database)
    with rfetch.outbox.using(db.conn):
        gone = client.push("app.Send", [1])
        db.conn.rollback()
        kept = client.push_bulk("app.Send", [[2], [3]])
        db.conn.commit()
    db.close()
    relay = build_relay(config, mysql_database)
    assert relay.relay_batch() == 2
    assert sorted(queued_jids(r)) == sorted(kept)
    assert gone not in queued_jids(r)
    assert isinstance(relay, Relay)


def test_asyncio_push_goes_to_the_outbox(client: Client, sqlite_url: str, r: redis.Redis) -> None:
    import asyncio

    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))

    async def app() -> str | None:
        with rfetch.outbox.using(conn):
            return await client.aio.push("app.Send", [1])

    jid = asyncio.run(app())
    conn.commit()
    assert r.llen("queue:default") == 0
    assert rows(sqlite_url) == [(jid, "default")]


def test_redis_down_keeps_the_rows_for_later(sqlite_url: str, own_redis: RedisServer) -> None:
    config = Config(redis_url=own_redis.url)
    conn = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"))
    with rfetch.outbox.using(conn):
        jid = Client(config).push("app.Send", [1])
        conn.commit()
    relay = build_relay(config, sqlite_url)
    own_redis.stop()
    with pytest.raises(redis.ConnectionError):
        relay.relay_batch()
    assert rows(sqlite_url) == [(jid, "default")]  # rolled back: still there
    own_redis.start()
    assert relay.relay_batch() == 1
    assert queued_jids(own_redis.client()) == [jid]
    assert rows(sqlite_url) == []
