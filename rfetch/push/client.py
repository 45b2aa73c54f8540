"""Pushing jobs: option checks, payload building, client middleware, single and bulk push.

The wire format is Sidekiq's: an immediate job is LPUSHed onto ``queue:<q>`` and ``<q>`` is
added to ``queues``; a scheduled job is ZADDed to ``schedule`` with its run time as score
and no ``enqueued_at``. The write itself, and Sidekiq Pro's reliable push (buffering while
Redis is unreachable), are :mod:`rfetch.push.delivery`'s.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from rfetch.config import Config
from rfetch.errors import BufferFull, ConfigError, QueueFull
from rfetch.jobs.middleware import run_client_chain
from rfetch.jobs.options import check_options
from rfetch.jobs.payload import Payload, check_args, dumps, new_jid
from rfetch.jobs.payload_fields import add_option_fields
from rfetch.outbox import context as outbox_context
from rfetch.push.async_client import AsyncClient
from rfetch.push.batch_context import collecting
from rfetch.push.buffer import BufferedJob, PushBuffer
from rfetch.push.bulk import BulkPush, check_batch_size
from rfetch.push.bulk_build import build_bulk
from rfetch.push.bulk_text import spliced_bulk
from rfetch.push.routing import deliver_to_shards, delivery_for
from rfetch.push.shards import shard_config
from rfetch.push.sink import INTERCEPTION, Send, Sink
from rfetch.store.connection import connect
from rfetch.store.keys import Keys


class Client:
    """Pushes jobs to Redis.

    Args:
        config: the rfetch Config (Redis URL, namespace, payload limit, client middleware).
        redis: an existing client to use instead of connecting to ``config.redis_url``. With
            ``config.min_replicas``, pushes still go through a connection of their own to
            ``config.redis_url`` (``WAIT`` must follow the write on one connection).
        sink: where serialised jobs go instead of straight to Redis (:mod:`rfetch.push.sink`):
            ``rfetch.testing``'s fake and inline modes, or the Django integration's
            on-commit deferral. None writes to Redis.

    With ``config.shards``, each job goes to its queue's shard (:mod:`rfetch.push.shards`), each
    shard with its own reliable-push buffer.

    Raises:
        ConfigError, RedisUnavailable: a bad Sentinel URL or master name, no sentinel
            reachable (:func:`rfetch.store.connection.connect`); ``redis`` given with shards.
    """

    def __init__(
        self, config: Config, redis: Redis | None = None, *, sink: Sink | None = None
    ) -> None:
        self.config = config
        self.sink = sink
        self.keys = Keys(config.namespace)
        if config.shards and redis is not None:
            raise ConfigError("a client of several shards connects to each itself")
        configs = [shard_config(config, i) for i in range(len(config.shards))] or [config]
        clients = [connect(c) for c in configs] if redis is None else [redis]
        self.deliveries = [delivery_for(c, r) for c, r in zip(configs, clients, strict=True)]
        self.delivery = self.deliveries[0]
        # What client middleware receives (the first shard's client, with shards).
        self.redis = clients[0]

    @property
    def buffer(self) -> PushBuffer:
        """The reliable-push buffer (memory or SQLite spool); the first shard's."""
        return self.delivery.buffer

    def pending(self) -> int:
        """Jobs buffered because Redis was unreachable, not yet delivered (all shards)."""
        return sum(delivery.pending() for delivery in self.deliveries)

    def flush(self, timeout: float = 0.0) -> int:
        """Deliver buffered jobs, retrying for up to ``timeout`` seconds (per shard).

        Returns:
            Jobs still buffered (0 when everything was delivered).
        """
        return sum(delivery.flush(timeout) for delivery in self.deliveries)

    def build(
        self,
        class_name: str,
        args: Sequence[Any],
        options: Mapping[str, Any],
        at: float | None,
        *,
        now: float | None = None,
        jid: str | None = None,
        checked: bool = False,
    ) -> Payload:
        """A new payload in Sidekiq's field order.

        Args:
            class_name: the registered job name.
            args: JSON-native arguments.
            options: job options (see ``JOB_OPTIONS``).
            at: run time as float epoch seconds, or None to run now.
            now: the push time (epoch seconds; default ``time.time()``, or a test mode's
                clock: :data:`rfetch.push.sink.INTERCEPTION`).
            jid: the jid to use (default: ``options["jid"]`` or a new one).
            checked: ``options`` were already checked (push_bulk checks them once).

        Raises:
            ArgsNotSerializable: an argument is not native JSON.
            ConfigError: an unknown option or a bad option value.
        """
        if not checked:
            check_options(options)
        args = list(args)
        check_args(args)
        if now is None:
            now = INTERCEPTION.now()
        payload: Payload = {
            "retry": options.get("retry", True),
            "queue": options.get("queue") or "default",
            "class": class_name,
            "args": args,
            "jid": jid or options.get("jid") or new_jid(),
            "created_at": now,
        }
        collector = collecting()
        if collector is not None:  # inside a batch's jobs() block (Sidekiq Pro's "bid")
            payload["bid"] = collector.bid
        add_option_fields(payload, options, at, now)
        if at is None or at <= now:
            payload["enqueued_at"] = now
        else:
            payload["at"] = at
        return payload

    def push(
        self,
        class_name: str,
        args: Sequence[Any],
        options: Mapping[str, Any] | None = None,
        at: float | None = None,
        *,
        buffer: bool = True,
    ) -> str | None:
        """Push one job; return its jid, or None if client middleware stopped the push or a
        unique job's lock is held (nothing is written then).

        Args:
            class_name: registered job name (``module.Class`` or the job's ``name``).
            args: JSON-native arguments.
            options: job options.
            at: run time (float epoch seconds); None or a past time runs now.
            buffer: while Redis is unreachable, keep the job in the reliable-push buffer
                and return its jid (default); False raises instead, so the caller knows
                the job is not in Redis (``rfetch enqueue``).

        Raises:
            ArgsNotSerializable, PayloadTooLarge, ConfigError: nothing is written.
            BufferFull: Redis is unreachable and the buffer is full.
            redis.exceptions.ConnectionError, TimeoutError, OSError: Redis cannot be
                reached and ``buffer`` is False.
        """
        payload = self.prepare(class_name, args, options, at)
        if payload is None:
            return None
        jid: str = payload["jid"]
        written = self._write(self.serialized([payload]), buffer=buffer)
        return jid if written is None or written[0] else None

    def prepare(
        self,
        class_name: str,
        args: Sequence[Any],
        options: Mapping[str, Any] | None = None,
        at: float | None = None,
    ) -> Payload | None:
        """The payload of one push, built, checked and through the client middleware; None
        when the middleware dropped it (see :meth:`push`)."""
        return self._through_middleware(self.build(class_name, args, options or {}, at))

    def push_bulk(
        self,
        class_name: str,
        args_list: Iterable[Sequence[Any]],
        options: Mapping[str, Any] | None = None,
        at: float | None = None,
        batch_size: int | None = None,
        options_for: Callable[[Sequence[Any]], Mapping[str, Any]] | None = None,
    ) -> list[str]:
        """Push many jobs of one class, all or none: one atomic Redis call (``push.lua``)
        writes them all, or raises having written none, so a retry of the whole call never
        doubles a job (Sidekiq's push_bulk writes 1,000 per MULTI/EXEC, which Redis does
        not roll back).

        Every payload is built and checked before anything is written, so bad arguments in
        any job write nothing at all.

        Args:
            batch_size: None (default): the whole call is one atomic write. A number: at
                most that many jobs per atomic write, so Redis never runs one step of more
                (for very large calls); a failure then raises :class:`BulkPushError`
                naming exactly the jobs written.

        Returns:
            The jids pushed (jobs dropped by client middleware, and unique jobs whose lock
            is held, are left out).

        Raises:
            ArgsNotSerializable, PayloadTooLarge, ConfigError: nothing is written.
            ConfigError: ``jid`` given as a bulk option (it must be unique per job).
            redis.exceptions.ResponseError: Redis refused the write (a key rfetch writes
                holds another type, out of memory, READONLY); nothing is written.
            BulkPushError: with a ``batch_size``, a batch after the first was refused (by
                Redis, or a full buffer): the earlier batches are written or buffered
                (``exc.jids``), no other job is.
            BufferFull: Redis is unreachable and the push buffer cannot take the jobs;
                none was accepted.

        ``options_for(args)``, when given, supplies each job's options instead of
        ``options`` (a class-level ``ordering_key`` differs per job); they are checked too.
        """
        bulk = self.bulk(class_name, args_list, options, at, batch_size, options_for)
        for start, end in bulk.batches():
            try:
                written = self._write(bulk.jobs[start:end])
            except (RedisError, BufferFull, QueueFull) as exc:
                bulk.refused(start, exc)
                raise
            bulk.wrote(start, end, written)
        return bulk.jids

    def bulk(
        self,
        class_name: str,
        args_list: Iterable[Sequence[Any]],
        options: Mapping[str, Any] | None,
        at: float | None,
        batch_size: int | None,
        options_for: Callable[[Sequence[Any]], Mapping[str, Any]] | None,
    ) -> BulkPush:
        """A bulk push with every payload built, checked, through the client middleware
        and serialised before anything is written (see :meth:`push_bulk`).

        Raises:
            ArgsNotSerializable, PayloadTooLarge, ConfigError: as :meth:`push_bulk`.
        """
        check_batch_size(batch_size)
        if not self.config.client_middleware and options_for is None:  # rfetch.push.bulk_text
            args_list = list(args_list)  # read once, for either way below
            spliced = spliced_bulk(self, class_name, args_list, options, at, self.config)
            if spliced is not None:
                return BulkPush(range(len(args_list)), *spliced, batch_size)
        indexed = self.prepare_bulk(class_name, args_list, options, at, options_for)
        payloads = [p for _, p in indexed]
        jids = [p["jid"] for p in payloads]
        return BulkPush([i for i, _ in indexed], jids, self.serialized(payloads), batch_size)

    def prepare_bulk(
        self,
        class_name: str,
        args_list: Iterable[Sequence[Any]],
        options: Mapping[str, Any] | None = None,
        at: float | None = None,
        options_for: Callable[[Sequence[Any]], Mapping[str, Any]] | None = None,
    ) -> list[tuple[int, Payload]]:
        """The payloads of a bulk push, every one built, checked and through the client
        middleware before anything is written (see :meth:`push_bulk`), each with its
        position in ``args_list`` (the middleware may drop some)."""
        return build_bulk(
            self, self._through_middleware, class_name, args_list, options, at, options_for
        )

    def _through_middleware(self, payload: Payload) -> Payload | None:
        chain = self.config.client_middleware
        if not chain:
            return payload
        return run_client_chain(chain, payload["class"], payload, payload["queue"], self.redis)

    def serialized(self, payloads: Sequence[Payload]) -> list[BufferedJob]:
        """The payloads as JSON text with their queue and run time; Sidekiq removes ``at``
        before storing (the schedule's score has it).

        Raises:
            PayloadTooLarge: a payload is over ``max_payload_bytes``.
        """
        jobs = []
        for payload in payloads:
            if "after" in payload:
                raise ConfigError(
                    "a job with after= waits outside every queue: push it with "
                    "Job.set(after=...).perform_async or rfetch.chain"
                )
            at = payload.pop("at", None)
            text = dumps(payload, self.config.max_payload_bytes)
            jobs.append(BufferedJob(payload["queue"], text, at))
        return jobs

    @functools.cached_property
    def aio(self) -> AsyncClient:
        """This client's face for asyncio code (``await client.aio.push(...)``; what
        ``aperform_async`` uses): the same Config, checks, middleware, sink and push
        buffer, writing through ``redis.asyncio``."""
        return AsyncClient(self)

    def _write(self, jobs: Sequence[BufferedJob], *, buffer: bool = True) -> list[bool] | None:
        """Push serialised jobs (see :meth:`Delivery.write`): per job whether written, or
        None when buffered.

        Raises:
            BufferFull: Redis is unreachable and the buffer cannot take them all.
            redis.exceptions.ConnectionError, TimeoutError, OSError: Redis is unreachable
                and ``buffer`` is False.
        """
        collector = collecting()
        if collector is not None:  # written with the batch when its jobs() block ends
            return collector.take(list(jobs))
        outbox = outbox_context.current()
        if outbox is not None and INTERCEPTION.current() is None:
            return outbox.write(jobs)  # rows in the caller's transaction (rfetch.outbox)
        return self.route(jobs, lambda held: self.deliver(held, buffer))

    def route(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool] | None:
        """Hand ``jobs`` to this client's sink with ``send`` as its write, or to ``send``
        when there is no sink; inside a test mode (``rfetch.testing``) ``send`` is the test
        mode's instead (:data:`rfetch.push.sink.INTERCEPTION`), so nothing reaches Redis.

        Raises:
            whatever the sink or ``send`` raises.
        """
        send = INTERCEPTION.send(send)
        return send(jobs) if self.sink is None else self.sink.write(jobs, send)

    def deliver(self, jobs: Sequence[BufferedJob], buffer: bool = True) -> list[bool] | None:
        """Write through the delivery of each job's shard, past any sink (see
        :meth:`_write`; what a sink is given to write with)."""
        return deliver_to_shards(self.config, self.deliveries, jobs, buffer)


class DefaultClient:
    """Holder of the one process-wide client used by ``perform_async`` and friends.

    Set by :func:`rfetch.configure`, or built from ``Config.from_env()`` at the first push.
    With :data:`rfetch.push.sink.INTERCEPTION` (the test modes' registry), the only module-level
    mutable state in rfetch.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._client: Client | None = None

    def set(self, client: Client | None) -> None:
        """Replace the default client (None: build from the environment at next use)."""
        self.swap(client)

    def swap(self, client: Client | None) -> Client | None:
        """Replace the default client and return the one it replaces (None when none was
        built yet), so a caller can put it back (``rfetch.testing.fake()`` does)."""
        with self._lock:
            previous, self._client = self._client, client
            return previous

    def peek(self) -> Client | None:
        """The default client if one is set or built, without building one."""
        with self._lock:
            return self._client

    def get(self) -> Client:
        """The default client, building it from the environment on first use."""
        with self._lock:
            if self._client is None:
                self._client = Client(Config.from_env())
            return self._client


DEFAULT = DefaultClient()


def configure(config: Config | None = None, **fields: Any) -> Client:
    """Set the process-wide client that ``Job.perform_async`` and friends use.

    Args:
        config: a Config; or omit it and pass Config fields (``redis_url=...``), which are
            applied over ``Config.from_env()``.

    Returns:
        The new default client.
    """
    if config is None:
        config = Config.from_env(**fields)
    elif fields:
        config = config.replace(**fields)
    client = Client(config)
    DEFAULT.set(client)
    return client
