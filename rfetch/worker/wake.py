"""Wake-ups: an idle worker of several queues starts a job pushed to any of them at once.

An idle worker blocks on ONE queue (``BLMOVE`` of the first queue of the order into its
private list: reliable fetch admits no ``BRPOP``/``BLMPOP`` pop across queues, which could
lose a job). A job pushed to another of its queues wakes it through pub/sub: every Lua
script that puts a job into a public queue also ``PUBLISH``es on a channel named like the
queue's key (``queue:<q>``), which costs Redis a dictionary lookup when nobody listens.
While the worker idles, a :class:`Waker` thread listens on its queues' channels; a
message for another queue than the one blocked on ends the blocking command by
``CLIENT UNBLOCK <id>`` of its connection (as a timeout: an empty reply), and the thread
that ran it at once runs one atomic fetch (``fetch.lua``) in queue order (strict or
weighted) and starts the job it gets. Every idle worker of that queue is woken: one gets
the job, each other runs one empty fetch (Sidekiq's ``BRPOP`` wakes one client).

The race (a message heard while the fetcher looks, before the blocking command reaches
Redis) is closed by a count of wake-ups: the fetcher notes it before it looks
(:meth:`Waker.look`), and the blocking command is not sent at all if a wake-up came since
(:meth:`Waker.blocking_call`); a wake-up heard once the command is marked under way
repeats ``CLIENT UNBLOCK`` until Redis has the command (a reply of 1) or it ended.

The fetch that follows a wake-up costs no round trip of its own: the thread about to block
packs that fetch (one job, queue order) before it sends the blocking command, and the
listener, when it wakes that command, first appends the fetch to the blocked connection
(Redis runs a client's commands in order, so the fetch runs as soon as the blocking command
ends) and then sends ``CLIENT UNBLOCK``; the thread reads both replies. On a TLS connection
(whose socket one thread may not write while another reads) the thread fetches after the
reply, as it does when the wake-up came before the blocking command was sent.

Cost: the worker subscribes only while it idles (it blocked in the last ``linger``
seconds) and unsubscribes when it has been busy that long, so the pushes to a busy
worker's queues fan out to no one; an idle worker sends no command for it (a subscribed
connection only listens); ``CLIENT ID`` is asked once per blocking connection. On
(re)subscribing, a wake-up is counted at once, so a job pushed while the subscription was
being made, or while it was down (a connection error, a Sentinel failover), is looked for.

Not woken: a job LPUSHed by another client (Sidekiq's Ruby client) to a queue other than
the first runs within ``block_timeout`` as before. On a Redis Cluster a script's
``PUBLISH`` reaches every node through the cluster bus (no sharded pub/sub: Redis 5 and 6
have none), so the worker's subscription may be on any node.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from redis import Redis
from redis.connection import AbstractConnection, ConnectionPool
from redis.exceptions import ResponseError
from redis.typing import EncodableT

from rfetch.guard import ThreadGuard
from rfetch.worker.context import WorkerContext

log = logging.getLogger("rfetch.wake")

LINGER = 10.0
"""Least seconds the worker stays subscribed after its last blocking fetch."""

UNBLOCK_RETRY = 0.0005
"""Seconds between two ``CLIENT UNBLOCK`` of a command sent but not yet in Redis."""

@dataclass(eq=False)
class Blocked:
    """A blocking command under way (the fields but ``client`` and ``cid`` change under
    the waker's lock).

    Attributes:
        client: its client.
        cid: its connection's client id.
        queue: the queue whose jobs it takes itself (None: a wake list, any message ends it).
        sock: its connection's socket, when the follow-up may be appended to it.
        follow: the packed follow-up commands (the fetch, and the start mark), or None.
        count: how many commands ``follow`` packs.
        sent: whether the blocking command is wholly sent (the follow-up may go after it).
        appended: whether the listener appended the follow-up.
        covered: the wake-ups heard when it was appended (the fetch sees their jobs).
    """

    client: Redis
    cid: int
    queue: str | None
    sock: socket.socket | None = None
    follow: bytes | None = None
    count: int = 1
    sent: bool = False
    appended: bool = False
    covered: int = 0


class Waker:
    """Ends the idle worker's blocking fetch when a job lands on another of its queues.

    Args:
        context: config (queue names, ``block_timeout`` and ``network_timeout``, seconds),
            key names (a queue's channel is its key) and the client (one pooled
            connection subscribes while idle).
    """

    def __init__(self, context: WorkerContext) -> None:
        config = context.config
        self.redis = context.redis
        self.channels = {context.keys.queue(q.name): q.name for q in config.queues}
        self.linger = max(LINGER, 2 * (config.block_timeout + config.network_timeout))
        self._patience = config.block_timeout + config.network_timeout
        self._lock = threading.Lock()
        self._wakes = 0
        """Wake-ups heard (messages for another queue than the one blocked on)."""
        self._seen = 0
        """:attr:`_wakes` when the fetcher last looked at the queues."""
        self._blocked: Blocked | None = None
        self._last_block = float("-inf")
        self._wanted = threading.Event()
        self.subscribed = False
        self._ids: WeakKeyDictionary[AbstractConnection, tuple[object, int]] = (
            WeakKeyDictionary()
        )
        self.guard = ThreadGuard("wake listener", log, redis=self.redis, first=1.0, cap=10.0)

    def look(self) -> None:
        """The fetcher is about to look at the queues (a fetch or ``EXISTS``): a wake-up
        heard from now on stops the blocking fetch that may follow."""
        with self._lock:
            self._seen = self._wakes

    def woken(self) -> bool:
        """Whether a wake-up came since the fetcher last looked at the queues."""
        with self._lock:
            return self._wakes != self._seen

    def blocking_call(self, client: Redis, queue: str | None, *args: Any) -> Any:
        """Run the blocking command ``args`` (``BLMOVE``, ``BLPOP``) on a pooled connection
        of ``client`` whose client id is known, so that a wake-up can end it.

        Args:
            client: the client of the server holding the keys (a cluster's node client).
            queue: the queue the command takes jobs from itself (its messages do not end
                it); None for a wake list.
            args: the command and its arguments.

        Returns:
            The parsed reply; None (an empty reply) when a wake-up came since
            :meth:`look` (nothing is sent) or ended the command.

        Raises:
            redis.exceptions.RedisError: as the command (the connection is dropped).
        """
        return self.blocking_then(client, queue, args, None)[0]

    def blocking_then(
        self,
        client: Redis,
        queue: str | None,
        command: Sequence[Any],
        follow: Sequence[EncodableT] | None,
    ) -> tuple[Any, Any]:
        """:meth:`blocking_call` of ``command``; a wake-up that ends it appends ``follow``
        (the fetch) to the same connection first, so it runs in Redis right after the
        blocking command, with no round trip of its own (see the module's docstring).

        Returns:
            (the blocking command's reply, ``follow``'s raw reply or None when it was not
            sent or Redis answered it with an error: the caller then fetches itself).

        Raises:
            redis.exceptions.RedisError: as the command (the connection is dropped).
        """
        reply, followed = self.blocking_then_all(
            client, queue, command, [] if follow is None else [follow])
        return reply, followed[0] if followed else None

    def blocking_then_all(
        self,
        client: Redis,
        queue: str | None,
        command: Sequence[Any],
        follows: Sequence[Sequence[EncodableT]],
    ) -> tuple[Any, list[Any] | None]:
        """:meth:`blocking_then` with several follow-up commands (the fetch, then the start
        mark of what it moved), appended together and run in order.

        Returns:
            (the blocking command's reply, the follow-ups' raw replies, each None when Redis
            answered it with an error; None when they were not sent).

        Raises:
            redis.exceptions.RedisError: as the command (the connection is dropped).
        """
        pool = client.connection_pool
        conn: Any = _connection(pool)  # redis-py's connection methods are untyped
        try:
            under = Blocked(client, self._client_id(conn), queue)
            sock = getattr(conn, "_sock", None)  # no public way to reach it
            if follows and isinstance(sock, socket.socket) and not isinstance(
                sock, ssl.SSLSocket
            ):
                under.sock, under.count = sock, len(follows)
                under.follow = b"".join(b"".join(conn.pack_command(*f)) for f in follows)
            with self._lock:
                self._last_block = time.monotonic()
                if not self.subscribed:
                    self._wanted.set()
                if self._wakes != self._seen:
                    return None, None
                self._blocked = under
            try:
                conn.send_command(*command)
                with self._lock:
                    under.sent = True
                reply = client.parse_response(conn, command[0])  # type: ignore[no-untyped-call]
            finally:
                with self._lock:
                    self._blocked = None
            return reply, self._followed(conn, under) if under.appended else None
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

    def _followed(self, conn: Any, under: Blocked) -> list[Any]:
        """The appended follow-ups' replies (None for an error reply, such as a function not
        loaded yet); the wake-ups they cover are looked at unless the first (the fetch)
        was an error."""
        replies: list[Any] = []
        for _ in range(under.count):
            try:
                replies.append(conn.read_response())
            except ResponseError:
                replies.append(None)
        if replies[0] is not None:
            with self._lock:
                self._seen = under.covered
        return replies

    def _client_id(self, conn: Any) -> int:
        """``CLIENT ID`` of ``conn``'s socket: asked once per (re)connection."""
        conn.connect()
        sock = getattr(conn, "_sock", None)
        known = self._ids.get(conn)
        if known is not None and known[0] is sock:
            return known[1]
        conn.send_command("CLIENT", "ID")
        cid = int(conn.read_response())
        self._ids[conn] = (sock, cid)
        return cid

    def wake(self, queue: str | None, fetch: bool = True) -> None:
        """A job landed on ``queue`` (None: maybe on any queue): end the blocking fetch
        unless it takes that queue's jobs itself, or keep the next one from starting;
        ``fetch``: append its follow-up fetch first (:meth:`blocking_then`)."""
        with self._lock:
            blocked = self._blocked
            if blocked is not None and queue is not None and blocked.queue == queue:
                return
            self._wakes += 1
            if blocked is not None and fetch:
                self._append(blocked)
        deadline = time.monotonic() + self._patience
        while blocked is not None and time.monotonic() < deadline:
            if blocked.client.client_unblock(blocked.cid):
                return
            time.sleep(UNBLOCK_RETRY)  # sent but not yet in Redis, or just ended
            with self._lock:
                if self._blocked is not blocked:
                    return  # it ended; the fetcher looks again before the next one
                if fetch:
                    self._append(blocked)

    def _append(self, blocked: Blocked) -> None:
        """Hold ``_lock``. Append the follow-up of a blocking command wholly sent, once:
        Redis runs it right after that command ends (by this wake-up or by its timeout)."""
        if blocked.follow is None or blocked.sock is None or not blocked.sent or blocked.appended:
            return
        blocked.appended = True  # its reply is read even if the send failed: that fails too
        blocked.covered = self._wakes
        try:
            blocked.sock.sendall(blocked.follow)
        except OSError:  # a broken connection: the blocked thread's read fails at once
            with contextlib.suppress(OSError):
                blocked.sock.shutdown(socket.SHUT_RDWR)

    def interrupt(self) -> None:
        """End the blocking fetch under way, if any (the worker goes quiet: it need not
        wait ``block_timeout``), with no fetch after it; never raises (a failed ``CLIENT
        UNBLOCK`` is only slower)."""
        try:
            self.wake(None, fetch=False)
        except Exception as exc:
            log.debug("could not end the blocking fetch at once: %s", exc)

    def _idle(self) -> bool:
        """Whether the worker blocked in the last ``linger`` seconds (or blocks now)."""
        with self._lock:
            if self._blocked is not None or time.monotonic() - self._last_block < self.linger:
                return True
            self._wanted.clear()
            self.subscribed = False
            return False

    def run(self, stop: threading.Event) -> None:
        """Listen on the queues' channels while the worker idles, until ``stop`` is set.
        Any error drops the subscription, which is made again after a back-off (1 s
        doubling to 10 s); the thread never ends on an exception."""
        while not stop.is_set():
            if not self._wanted.wait(1.0):
                continue
            pubsub = self.redis.pubsub()  # type: ignore[no-untyped-call]
            try:
                self._listen(pubsub, stop)
            except Exception as exc:
                with self._lock:
                    self.subscribed = False
                stop.wait(self.guard.failed(exc))
            finally:
                with contextlib.suppress(Exception):  # closing a broken connection may raise
                    pubsub.close()

    def _listen(self, pubsub: Any, stop: threading.Event) -> None:
        pubsub.subscribe(*self.channels)
        while not stop.is_set():
            message = pubsub.get_message(timeout=1.0)
            if not self._idle():
                return  # busy for a while: pushes to its queues no longer fan out here
            if message is None:
                continue
            kind = message["type"]
            if kind == "message":
                channel = message["channel"]
                name = channel.decode() if isinstance(channel, bytes) else str(channel)
                self.wake(self.channels.get(name))
            elif kind == "subscribe" and message["data"] == len(self.channels):
                # Subscribed to every channel (again, after a reconnection): look for what
                # was pushed before.
                self.wake(None)
                with self._lock:
                    self.subscribed = True
                self.guard.succeeded()


def _connection(pool: ConnectionPool) -> Any:
    """A connection of ``pool`` (redis-py 5.0 wants a command name, later ones none)."""
    try:
        return pool.get_connection()
    except TypeError:  # redis-py < 5.3
        return pool.get_connection("BLMOVE")
