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

The jobs of a fetch that go to threads idle at that moment (no held job is theirs to run,
so each takes one at once) are marked by the fetcher before it hands them over, in one
``HSET`` for the batch, each under a *hand-off slot* lent to it (``f0`` ..
``f<concurrency - 1>``), instead of one ``HSET`` by each thread: still before
``perform``. A slot is lent until its job ends; one whose job leaves unstarted (pushed back
on quiet or a pause) has its mark deleted (``HDEL``) before the slot is lent again. So the
hash has at most ``2 * concurrency + async_concurrency`` fields.

The job an idle thread's own blocking fetch gets is marked by Redis: ``mark_fetched.lua`` is
pipelined on its connection right behind the ``BLMOVE`` (a worker of one queue) or behind the
fetch a wake-up appends (a worker of several), so Redis writes the mark under the thread's
slot before the thread even has its reply; the thread then writes nothing on its way to
``perform`` (:meth:`StartMarks.marked`). A job the ``BLMOVE`` of a worker of several queues
brings by itself is marked by its thread.

Recovery (:meth:`rfetch.worker.orphan_recovery.OrphanRecovery.reap`) reads the hash once per
dead process: a job whose payload is in it is counted, one whose payload is not is pushed
back without counting.
"""

from __future__ import annotations

import logging
import select
import socket
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
        slots: hand-off slots (:meth:`handed`): the threads' count, or 0 (none with a
            Redis Cluster client either: its marks are plain ``HSET`` calls).
    """

    def __init__(self, client: redis.Redis, keys: Keys, identity: str, slots: int = 0) -> None:
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
        key = self.key.encode()
        self._head = b"$4\r\nHSET\r\n$%d\r\n%s\r\n" % (len(key), key)
        """``HSET <key>`` in RESP (the command's first two parts)."""
        self._slots: dict[str, bytes] = {}
        """Slot -> its name packed in RESP (at most one per thread and loop slot)."""
        self._free = [f"f{i:x}" for i in range(slots)] if self._conn is not None else []
        """Hand-off slots not lent."""
        self._lent: dict[int, tuple[UnitOfWork, str]] = {}
        """id(unit) -> (unit, the hand-off slot its mark is under) (:meth:`handed`); the unit
        is kept so that its id is not reused by another job while the entry lives."""
        self._fetched: dict[int, tuple[UnitOfWork, str]] = {}
        """id(unit) -> (unit, the thread slot Redis marked it under) (:meth:`marked`)."""

    def handed(self, units: Sequence[UnitOfWork]) -> None:
        """``units`` go to threads idle now (each takes one at once): marked started now,
        each under a fetch slot of its own, in one ``HSET`` (:meth:`mark_many`); those
        beyond the free slots are left to their threads. Never raises."""
        with self._lock:
            lent = self._free[len(self._free) - min(len(units), len(self._free)):]
            del self._free[len(self._free) - len(lent):]
            for unit, slot in zip(units, lent, strict=False):
                self._lent[id(unit)] = (unit, slot)
        if lent:
            self.mark_many(list(zip(lent, units, strict=False)))

    def marked(self, unit: UnitOfWork, slot: str) -> None:
        """Redis marked ``unit`` under the thread slot ``slot`` as its blocking fetch moved
        it (``mark_fetched.lua``): the thread does not mark it again (:meth:`mark`)."""
        with self._lock:
            self._fetched[id(unit)] = (unit, slot)

    def ended(self, unit: UnitOfWork) -> None:
        """``unit`` (started, or found lost) is done with: its hand-off slot, if any, is free
        again (its mark stays until the slot is lent again, as a thread's does)."""
        with self._lock:
            self._fetched.pop(id(unit), None)
            entry = self._lent.pop(id(unit), None)
            if entry is not None:
                self._free.append(entry[1])

    def unstarted(self, units: Sequence[UnitOfWork]) -> None:
        """``units`` leave this process without having started: the marks written when
        they were handed over are deleted, then their slots are free again. Never
        raises."""
        with self._lock:
            slots = [e[1] for e in (self._lent.pop(id(unit), None) for unit in units) if e]
            fetched = [e[1] for e in (self._fetched.pop(id(u), None) for u in units) if e]
        self._unmark(slots, fetched)

    def _unmark(self, slots: Sequence[str], fetched: Sequence[str] = ()) -> None:
        """Delete the marks under ``slots`` (hand-off slots) and ``fetched`` (thread slots
        Redis marked at a blocking fetch) whose jobs never started, then free the hand-off
        slots. The ``HDEL`` goes on the marks' connection, so Redis runs it after the
        ``HSET`` it undoes and before the next one on those slots. Never raises (the marks
        stay until their slots are written again)."""
        if not slots and not fetched:
            return
        parts = [b"HDEL", self.key.encode(), *(slot.encode() for slot in [*slots, *fetched])]
        try:
            self._send_packed(b"*%d\r\n" % len(parts) + b"".join(
                b"$%d\r\n%s\r\n" % (len(part), part) for part in parts))
        except (RedisError, OSError) as exc:
            log.warning("could not delete %d start mark(s): %s", len(slots), exc)
        with self._lock:
            self._free += slots

    def mark(self, slot: str, unit: UnitOfWork) -> None:
        """Note that ``slot`` (a thread's or a loop slot's name) starts ``unit`` now; a
        job marked when it was handed to an idle thread (:meth:`handed`), or by Redis
        behind the blocking fetch of the thread of ``slot`` (:meth:`marked`), is not marked
        again.

        Never raises: when Redis cannot be written, the job still runs (it would fail on
        its own Redis writes anyway) and, should the process die running it, its recovery
        is not counted; the error is logged.
        """
        fetched = None
        if self._fetched:  # entries are added by the thread that marks them, before this
            with self._lock:
                fetched = self._fetched.pop(id(unit), None)
        if fetched is not None and fetched[0] is unit and fetched[1] == slot:
            return  # Redis marked it under this slot behind the blocking fetch
        entry = self._lent.get(id(unit))
        if entry is None or entry[0] is not unit:
            self.mark_many(((slot, unit),))

    def mark_many(self, started: Sequence[tuple[str, UnitOfWork]]) -> None:
        """:meth:`mark` for several slots at once (the event loop starts jobs in batches):
        one ``HSET`` of every field, one ``sendall``. Never raises."""
        try:
            if self._conn is None:
                fields: list[str | bytes] = []
                for slot, unit in started:
                    fields += (slot, unit.raw)
                self.redis.hset(self.key, items=fields)
                return
            self._send_packed(self._command(started))
        except (RedisError, OSError) as exc:
            log.warning("could not write %d start mark(s): %s", len(started), exc)

    def _send_packed(self, command: bytes) -> None:
        """Send ``command`` (RESP) on the marks' connection, opened again if Redis closed
        it. Raises what the connection raises."""
        conn = self._conn
        if conn is None:
            raise OSError("the start marks have no connection of their own")
        # The readability check (a syscall, which lets other threads take the GIL) runs
        # outside the lock: a thread holding the lock while it waited for the GIL stalled
        # every thread about to start a job (profiled under load).
        seen = conn._get_socket() if self._ready else None  # no public way to peek
        try:
            stale = seen is not None and bool(select.select([seen], [], [], 0)[0])
        except (ValueError, OSError):  # closed meanwhile by another thread's reopening
            stale = True
        with self._lock:
            self._send(conn, command, seen, stale)

    def _command(self, started: Sequence[tuple[str, UnitOfWork]]) -> bytes:
        """``HSET key slot payload ...`` in RESP. The key's and each slot's parts are packed
        once, so a mark costs one join and one ``sendall`` (redis-py's command packing was
        most of a mark's time, profiled)."""
        parts = [b"*%d\r\n" % (2 + 2 * len(started)), self._head]
        for slot, unit in started:
            raw = unit.raw
            parts += (self._slots.get(slot) or self._slot(slot), b"$%d\r\n" % len(raw), raw,
                      b"\r\n")
        return b"".join(parts)

    def _slot(self, slot: str) -> bytes:
        data = slot.encode()
        packed = self._slots[slot] = b"$%d\r\n%s\r\n" % (len(data), data)
        return packed

    def _send(
        self, conn: AbstractConnection, command: bytes, seen: socket.socket | None, stale: bool
    ) -> None:
        """Hold ``_lock``. ``seen``: the connection's socket as the caller looked at it,
        ``stale``: it was readable. A connection Redis closed (idle ``timeout``, a restart)
        turns readable, since Redis never writes to it otherwise: it is then opened again,
        unless another thread did since."""
        sock = conn._get_socket() if self._ready else None
        if sock is None or (stale and sock is seen):
            conn.disconnect()  # type: ignore[no-untyped-call]
            self._ready = False
            conn.connect()  # type: ignore[no-untyped-call]
            conn.send_command(  # type: ignore[no-untyped-call]
                "CLIENT", "REPLY", "OFF", check_health=False
            )
            sock = conn._get_socket()
            if sock is None:
                raise OSError("the start marks' connection has no socket")
            self._ready = True
        try:
            sock.sendall(command)
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
