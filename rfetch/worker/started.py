"""Start marks: which of the jobs a process held it had started (poison-pill counting).

Orphan recovery counts a recovery against a job's poison-pill limit
(``poison_max_recoveries``) only when the dead process had started the job: a job it had
fetched and not started yet (waiting for a thread, or for a slot of the event loop) did
not kill it. Before a thread or an event-loop slot starts a job, it writes the job's exact
payload bytes (as they sit in the private list, so no parse is needed and an unreadable
payload is marked too) into the process's hash ``<identity>:started`` under its own slot:
one HSET, overwriting the slot's previous job, so the hash has at most ``concurrency +
async_concurrency`` fields and needs no clean-up per job. The mark is written before
``perform`` is called: a job that kills its process at once has been marked.

Recovery (:meth:`rfetch.worker.orphan_recovery.OrphanRecovery.reap`) reads the hash once per
dead process: a job whose payload is in it is counted, one whose payload is not is pushed
back without counting.
"""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Sequence

import redis
from redis.connection import AbstractConnection, ConnectionPool
from redis.exceptions import RedisError

from rfetch.store.keys import Keys
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.manager")


class StartMarks:
    """Writes the start marks of one process.

    The marks go out on a connection of their own on which Redis sends no replies
    (``CLIENT REPLY OFF``, Redis 3.2+): a mark is one ``sendall`` of an ``HSET``, no round
    trip, so the threads do not wait for Redis before ``perform``. Bytes handed to the
    kernel are delivered even if the process is SIGKILLed right after. With a Redis Cluster
    client (whose key-to-node routing this connection would bypass), a mark is a plain
    ``HSET``.

    Args:
        client: the worker's Redis client (its connection pool's settings are reused).
        keys: key names.
        identity: the process identity ``host:pid:hex``.
    """

    def __init__(self, client: redis.Redis, keys: Keys, identity: str) -> None:
        self.redis = client
        self.key = keys.started(identity)
        self._lock = threading.Lock()
        pool = getattr(client, "connection_pool", None)
        self._conn: AbstractConnection | None = (
            pool.connection_class(**pool.connection_kwargs)
            if isinstance(pool, ConnectionPool)
            else None
        )
        self._ready = False

    def mark(self, slot: str, unit: UnitOfWork) -> None:
        """Note that ``slot`` (a thread's or a loop slot's name) starts ``unit`` now.

        Never raises: when Redis cannot be written, the job still runs (it would fail on
        its own Redis writes anyway) and, should the process die running it, its recovery
        is not counted; the error is logged.
        """
        self.mark_many(((slot, unit),))

    def mark_many(self, started: Sequence[tuple[str, UnitOfWork]]) -> None:
        """:meth:`mark` for several slots at once (the event loop starts jobs in batches):
        one ``HSET`` of every field, one ``sendall``. Never raises."""
        fields: list[str | bytes] = []
        for slot, unit in started:
            fields += (slot, unit.raw)
        try:
            if self._conn is None:
                self.redis.hset(self.key, items=fields)
                return
            with self._lock:
                self._send(self._conn, fields)
        except (RedisError, OSError) as exc:
            log.warning("could not write %d start mark(s): %s", len(started), exc)

    def _send(self, conn: AbstractConnection, fields: list[str | bytes]) -> None:
        """Hold ``_lock``. A connection Redis closed (idle ``timeout``, a restart) turns
        readable, since Redis never writes to it otherwise: it is then opened again."""
        sock = conn._get_socket() if self._ready else None  # no public way to peek
        if sock is not None and select.select([sock], [], [], 0)[0]:
            sock = None
        if sock is None:
            conn.disconnect()  # type: ignore[no-untyped-call]
            self._ready = False
            conn.connect()  # type: ignore[no-untyped-call]
            conn.send_command(  # type: ignore[no-untyped-call]
                "CLIENT", "REPLY", "OFF", check_health=False
            )
            self._ready = True
        try:
            conn.send_command(  # type: ignore[no-untyped-call]
                "HSET", self.key, *fields, check_health=False
            )
        except BaseException:
            self._ready = False
            raise

    def close(self) -> None:
        """Close the marks' connection (at the worker's stop)."""
        with self._lock:
            if self._conn is not None:
                self._conn.disconnect()  # type: ignore[no-untyped-call]
                self._ready = False


def started_payloads(client: redis.Redis, keys: Keys, identity: str) -> frozenset[bytes]:
    """The payloads ``identity``'s threads and loop slots started last (its start marks),
    exact bytes.

    Raises:
        redis.exceptions.RedisError: Redis could not be read.
    """
    values: list[bytes] = client.hvals(keys.started(identity))  # type: ignore[assignment]
    return frozenset(values)
