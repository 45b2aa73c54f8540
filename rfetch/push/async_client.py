"""Pushing jobs from asyncio code: ``await SendWelcome.aperform_async(42)``.

An :class:`AsyncClient` is the asyncio face of one :class:`rfetch.Client` (``client.aio``):
it builds and checks payloads and runs the client middleware with the same code, gives
them to the same sink (the Django on-commit deferral) and test mode (:mod:`rfetch.push.sink`),
and writes them through
``redis.asyncio`` with the same Lua script as the sync client: one ``push.lua`` call per
push or bulk push, all or none, its KEYS and ARGV built by the same code.

Reliable push is the sync client's, shared: when Redis cannot be reached, the jobs go to the
same buffer (memory or SQLite spool) and its delivery thread sends them in order as soon as
Redis answers; while the buffer holds jobs, newer pushes go after them through the same
(sync) path, run in a worker thread so the event loop does not wait.

The middleware receive the sync client's ``redis`` (Sidekiq passes its connection pool), so
one chain serves both clients; a middleware that calls Redis blocks the loop while it does.

The Redis topology is the sync client's too: a ``redis+sentinel://`` URL gives redis-py's
asyncio Sentinel client of the master, which follows a failover, and ``Config.cluster`` its
asyncio ``RedisCluster`` (:func:`rfetch.store.connection.connect_async`); the keys, and so
the hash slot of a ``{tag}`` namespace, are built by the same code. With
``Config.min_replicas`` a push is written by the sync client's delivery in a worker thread:
``WAIT`` (or ``WAITAOF``) must run on the connection that wrote, and a push not yet on
enough replicas stays in the one buffer whose delivery thread asks again on that connection
(:mod:`rfetch.push.replicas`), so the asyncio push returns once the replicas have it, as the sync
one does.

An asyncio Redis client belongs to the event loop that uses it, so one is made per loop
(a test suite that runs each test in its own loop gets a fresh one each time), and per
shard: with ``Config.shards`` each job goes to its queue's shard (:mod:`rfetch.push.shards`),
through that shard's push buffer when the shard cannot be reached, as with the sync client.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis.asyncio
from redis.exceptions import RedisError

from rfetch.errors import BufferFull, QueueFull
from rfetch.outbox import context as outbox_context
from rfetch.push.batch_context import collecting
from rfetch.push.buffer import BufferedJob
from rfetch.push.delivery import AsyncSender
from rfetch.push.shards import positions_by_shard, shard_config
from rfetch.push.sink import INTERCEPTION, AsyncSend, Send, awaitable, refused, routed
from rfetch.store.async_commands import AsyncCommands
from rfetch.store.connection import REDIS_DOWN, connect_async

if TYPE_CHECKING:
    from rfetch.push.client import Client


class AsyncClient:
    """Pushes jobs from asyncio code through ``client``'s Config, checks, middleware, sink
    and push buffer (see the module docstring).

    Args:
        client: the sync client it is the asyncio face of.
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self.config = client.config
        self._senders: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[int, AsyncSender]
        ] = weakref.WeakKeyDictionary()

    async def push(
        self,
        class_name: str,
        args: Sequence[Any],
        options: Mapping[str, Any] | None = None,
        at: float | None = None,
    ) -> str | None:
        """:meth:`rfetch.Client.push`, awaited: the jid, or None if client middleware
        stopped the push or a unique job's lock is held.

        Raises:
            ArgsNotSerializable, PayloadTooLarge, ConfigError: nothing is written.
            BufferFull: Redis is unreachable and the push buffer is full.
        """
        client = self.client
        payload = client.prepare(class_name, args, options, at)
        if payload is None:
            return None
        jid: str = payload["jid"]
        written = await self._write(client.serialized([payload]))
        return jid if written is None or written[0] else None

    async def push_bulk(
        self,
        class_name: str,
        args_list: Iterable[Sequence[Any]],
        options: Mapping[str, Any] | None = None,
        at: float | None = None,
        batch_size: int | None = None,
        options_for: Callable[[Sequence[Any]], Mapping[str, Any]] | None = None,
    ) -> list[str]:
        """:meth:`rfetch.Client.push_bulk`, awaited: every payload is checked before
        anything is written, then all or none in one atomic write (at most ``batch_size``
        per write when given); the jids written.

        Raises:
            ArgsNotSerializable, PayloadTooLarge, ConfigError: nothing is written.
            redis.exceptions.ResponseError: Redis refused the write; nothing is written.
            BulkPushError: with a ``batch_size``, a batch after the first was refused:
                exactly ``exc.jids`` were written.
            BufferFull: Redis is unreachable and the push buffer cannot take the jobs.
        """
        bulk = self.client.bulk(class_name, args_list, options, at, batch_size, options_for)
        for start, end in bulk.batches():
            try:
                written = await self._write(bulk.jobs[start:end])
            except (RedisError, BufferFull, QueueFull) as exc:
                bulk.refused(start, exc)
                raise
            bulk.wrote(start, end, written)
        return bulk.jids

    async def _write(self, jobs: Sequence[BufferedJob]) -> list[bool] | None:
        collector = collecting()
        if collector is not None:  # written with the batch when its jobs() block ends
            return collector.take(list(jobs))
        mode = INTERCEPTION.current()  # a test mode takes the write (rfetch.push.sink)
        outbox = outbox_context.current()
        if outbox is not None and mode is None:  # rows through the caller's (sync) connection
            return outbox.write(jobs)
        sink = self.client.sink
        if sink is None and mode is None:
            return await self._send_or_buffer(jobs)
        send: Send
        if sink is None:
            sink, send = mode, refused
        else:
            send = routed(mode, self.client.deliver)
        awrite = getattr(sink, "awrite", None)
        if awrite is not None:  # a sink with an asyncio form (inline mode, Django on-commit)
            asend: AsyncSend = self._send_or_buffer if mode is None else awaitable(send)
            result: list[bool] | None = await awrite(jobs, send, asend)
            return result
        assert sink is not None
        return sink.write(jobs, send)

    async def _send_or_buffer(self, jobs: Sequence[BufferedJob]) -> list[bool] | None:
        """Write each job to its shard (the only one without shards), or buffer it when
        that shard cannot be reached; a buffered group counts as written, as in
        :meth:`rfetch.Client.deliver`."""
        if len(self.client.deliveries) == 1:
            return await self._send_to(0, jobs)
        written = [True] * len(jobs)
        groups = positions_by_shard(self.config, [job.queue for job in jobs])
        for shard, positions in groups.items():
            outcome = await self._send_to(shard, [jobs[i] for i in positions])
            if outcome is not None:
                for position, ok in zip(positions, outcome, strict=True):
                    written[position] = ok
        return written

    async def _send_to(self, shard: int, jobs: Sequence[BufferedJob]) -> list[bool] | None:
        """Write to one shard, or buffer when it cannot be reached (:meth:`Delivery.write`'s
        rules: never ahead of a buffered job). With ``min_replicas`` the write is
        :meth:`Delivery.write` itself, in a worker thread (see the module docstring)."""
        delivery = self.client.deliveries[shard]
        if delivery.holding or delivery.replica_wait is not None:
            return await asyncio.to_thread(delivery.write, jobs)
        try:
            return await self._sender(shard).send(jobs, self.config.max_queue_size)
        except REDIS_DOWN as exc:
            await asyncio.to_thread(delivery.keep, jobs, exc)
            return None

    def connection(self) -> redis.asyncio.Redis:
        """The running event loop's asyncio Redis client (the first shard's), made on first
        use and kept with the loop: what ``rfetch.aresult`` blocks on.

        Raises:
            RuntimeError: no event loop is running.
            ConfigError: a malformed Sentinel URL (see
                :func:`rfetch.store.connection.connect_async`).
        """
        return self._sender(0).commands.redis

    def _sender(self, shard: int) -> AsyncSender:
        loop = asyncio.get_running_loop()
        senders = self._senders.setdefault(loop, {})
        sender = senders.get(shard)
        if sender is None:
            config = shard_config(self.config, shard) if self.config.shards else self.config
            commands = self.client.deliveries[shard].commands
            sender = AsyncSender(AsyncCommands(connect_async(config), commands))
            senders[shard] = sender
        return sender
