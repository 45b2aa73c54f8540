"""Delivery of pushed jobs to Redis, with Sidekiq Pro's reliable push.

:class:`Delivery` writes serialised jobs in one ``push.lua`` call, all or none (Sidekiq's
``raw_push``, which is a MULTI/EXEC that writes the jobs before a failing command): plain
jobs by LPUSH onto ``queue:<q>`` (and SADD to ``queues``) or ZADD to ``schedule``; jobs with
an ordering key, a unique lock or a tenant through the gate, in push order. When Redis
cannot be reached, the jobs are kept in a buffer (:mod:`rfetch.push.buffer`: memory, or a
durable SQLite spool) and the push still returns its jid. Buffered jobs are delivered in
order before any newer push, by a background thread with backoff, and at interpreter exit.
A full buffer raises BufferFull; nothing is dropped silently.

With ``Config.min_replicas``, every write is followed by ``WAIT`` on the connection that made
it (:mod:`rfetch.push.replicas`); jobs not on enough replicas in time stay at the head of the
buffer, marked as written: the retry thread asks ``WAIT`` again on the same connection and
drops them once replicated, or pushes them again if that connection was lost (at least once:
the first copy may have survived).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Mapping, Sequence

from redis import Redis

from rfetch.config import Config
from rfetch.errors import BufferFull
from rfetch.formatting import safe_url
from rfetch.guard import ThreadGuard
from rfetch.jobs.payload import Routing, may_be_gated, may_have_priority
from rfetch.push.buffer import BufferedJob, MemoryBuffer, PushBuffer, SpoolBuffer
from rfetch.push.replicas import NotReplicated, Replicated, ReplicaWait
from rfetch.store.async_commands import AsyncCommands
from rfetch.store.commands import Commands
from rfetch.store.connection import REDIS_DOWN
from rfetch.store.replies import Outgoing

log = logging.getLogger("rfetch.client")

RETRIED = (*REDIS_DOWN, NotReplicated)
"""Errors after which buffered jobs are tried again later."""

BULK_BATCH = 1000
"""Buffered jobs per ``push.lua`` call when the buffer is drained (Sidekiq's push_bulk
batch)."""


class Delivery:
    """Writes jobs to Redis, or buffers them while Redis is unreachable.

    Args:
        config: ``push_spool`` (directory of the durable spool, or None for memory),
            ``push_buffer_size`` (jobs), ``push_exit_timeout`` (seconds).
        commands: the Lua scripts (``push.lua``), with the client and key names.
        replica_wait: for ``min_replicas``: ``commands`` must use its client
            (``replica_wait.redis``); None writes without waiting for replicas.
    """

    def __init__(
        self, config: Config, commands: Commands, replica_wait: ReplicaWait | None = None
    ) -> None:
        self.config = config
        self.commands = commands
        self.replica_wait = replica_wait
        # Jobs at the head of the buffer already written on connection number `generation`
        # but not yet on enough replicas: (count, generation).
        self._written: tuple[int, int] | None = None
        self.redis: Redis = commands.redis
        self.keys = commands.keys
        self.buffer: PushBuffer = (
            SpoolBuffer(config.push_spool) if config.push_spool else MemoryBuffer()
        )
        self._lock = threading.RLock()
        self._retrier: threading.Thread | None = None
        self._exit_hook = False
        # Whether the buffer may hold jobs; saves a look at the spool file on every push.
        self._maybe_pending = bool(len(self.buffer))
        if self._maybe_pending:  # a spool left by an earlier process during an outage
            self._start_retrier()

    def pending(self) -> int:
        """Jobs buffered because Redis was unreachable, not yet delivered."""
        return len(self.buffer)

    def flush(self, timeout: float = 0.0) -> int:
        """Deliver buffered jobs, retrying for up to ``timeout`` seconds.

        Returns:
            Jobs still buffered (0 when everything was delivered).
        """
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            try:
                with self._lock:
                    self._drain()
                return 0
            except RETRIED:
                if time.monotonic() + delay > deadline:
                    return self.pending()
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def write(self, jobs: Sequence[BufferedJob], *, buffer: bool = True) -> list[bool] | None:
        """Push serialised jobs after every buffered one, or buffer them if Redis is
        unreachable.

        Args:
            jobs: the serialised jobs, in push order.
            buffer: False to raise instead of buffering (a process that must know that
                the jobs reached Redis before it exits, such as ``rfetch enqueue``).

        Returns:
            Per job, whether it was written (False: a unique job's lock was held); None
            when the jobs were buffered (a unique lock is then decided at delivery).

        Raises:
            BufferFull: Redis is unreachable and the buffer cannot take them all; none of
                them was accepted.
            redis.exceptions.ConnectionError, TimeoutError, OSError: Redis is unreachable
                and ``buffer`` is False; none of them was accepted.
        """
        with self._lock:
            try:
                self._drain()
                written = self._send(jobs, self.config.max_queue_size)
                if self.replica_wait is not None:
                    self.replica_wait.after_write()
                return written
            except REDIS_DOWN as exc:
                if not buffer:
                    raise
                self.keep(jobs, exc)
                return None
            except NotReplicated as exc:
                # Already written: the buffer (empty, as _drain succeeded) holds them as such.
                unshared = not len(self.buffer)
                self.keep(jobs, exc)
                if exc.generation is not None and unshared:
                    self._written = (len(jobs), exc.generation)
                return None

    @property
    def holding(self) -> bool:
        """Whether the buffer may hold jobs not delivered yet (a newer push must then go
        after them, through :meth:`write`)."""
        return self._maybe_pending

    def keep(self, jobs: Sequence[BufferedJob], exc: Exception) -> None:
        """Buffer ``jobs``, which could not be written because of ``exc`` (Redis
        unreachable), and deliver them in the background.

        Raises:
            BufferFull: the buffer cannot take them all; none of them was accepted.
        """
        held = len(self.buffer)
        if held + len(jobs) > self.config.push_buffer_size:
            raise BufferFull(
                f"Redis is unreachable ({exc}) and the push buffer holds {held} of "
                f"{self.config.push_buffer_size} jobs; {len(jobs)} more do not fit. Nothing "
                "was accepted: retry later, or raise Config.push_buffer_size"
            ) from exc
        self.buffer.extend(jobs)
        self._maybe_pending = True
        if held == 0:
            log.warning("Redis unreachable or replicas behind (%s); buffering pushes", exc)
        self._start_retrier()
        if not self._exit_hook:
            atexit.register(self._flush_at_exit)
            self._exit_hook = True

    def _drain(self) -> None:
        """Deliver every buffered job in order (raises REDIS_DOWN errors, NotReplicated)."""
        while self._maybe_pending:
            if self._written is not None:
                self._check_written(*self._written)
            with self.buffer.deliver(BULK_BATCH) as batch:
                if batch:
                    self._send(batch)
                    self._after_write(len(batch))
            if not batch:
                self._maybe_pending = False
                return
            log.info("delivered %d buffered job(s)", len(batch))

    def _after_write(self, count: int) -> None:
        """WAIT after delivering ``count`` buffered jobs; on NotReplicated they stay."""
        if self.replica_wait is None:
            return
        try:
            self.replica_wait.after_write()
        except NotReplicated as exc:
            if exc.generation is not None:
                self._written = (count, exc.generation)
            raise

    def _check_written(self, count: int, generation: int) -> None:
        """Settle the head jobs already written: drop them once replicated, push them again
        if their connection is gone, or raise NotReplicated (still too few replicas)."""
        assert self.replica_wait is not None
        outcome = self.replica_wait.check(generation)
        if outcome is Replicated.NOT_YET:
            raise NotReplicated("still too few replicas for jobs already pushed", generation)
        self._written = None
        if outcome is Replicated.YES:
            with self.buffer.deliver(count):
                pass
            log.info("%d buffered job(s) reached the replicas", count)

    def _send(
        self, jobs: Sequence[BufferedJob], max_sizes: Mapping[str, int] | None = None
    ) -> list[bool]:
        """One ``push.lua`` call, all or none (Sidekiq's raw_push, made atomic): per job,
        whether written (False: a unique job's lock was held). ``max_sizes`` (queue ->
        max_queue_size) is given for a new push, not for buffered jobs, which were
        accepted when pushed and are never refused at delivery.

        Raises:
            QueueFull: a queue of ``max_sizes`` would pass its size; nothing was written.
            redis.exceptions.ResponseError: a key on the jobs' way holds another type, or
                Redis refuses writes; nothing was written.
        """
        return self.commands.push(outgoing(jobs), max_sizes)

    def _start_retrier(self) -> None:
        if self._retrier is not None and self._retrier.is_alive():
            return
        self._retrier = threading.Thread(
            target=self._retry_loop, name="rfetch-push-retry", daemon=True
        )
        self._retrier.start()

    def _retry_loop(self) -> None:
        """Deliver the buffer until it is empty; any error (Redis down, a reply error such
        as OOM, a spool error) is logged once per kind and retried after a back-off."""
        guard = ThreadGuard("delivery of buffered jobs", log, redis=self.redis, cap=5.0)
        delay = guard.first
        while self._maybe_pending:
            time.sleep(delay)
            try:
                with self._lock:
                    self._drain()
            except Exception as exc:
                delay = guard.failed(exc)
            else:
                guard.succeeded()

    def _flush_at_exit(self) -> None:
        """At interpreter exit (``atexit``): deliver what is buffered, waiting up to
        ``push_exit_timeout`` seconds for Redis, and say loudly what was not delivered.

        A process that ends without running ``atexit`` hooks (SIGKILL, ``os._exit``, a
        signal whose default action ends it, such as SIGTERM without a handler) cannot
        deliver: only ``push_spool`` keeps its jobs then.
        """
        waiting = self.pending()
        if not waiting:
            return
        timeout = self.config.push_exit_timeout
        if timeout > 0:
            log.warning(
                "exiting with %d job(s) buffered while Redis at %s is unreachable; waiting up "
                "to %.0f s (Config.push_exit_timeout) to deliver them",
                waiting,
                safe_url(self.config.redis_url),
                timeout,
            )
        left = self.flush(timeout)
        if not left:
            log.warning("delivered the %d buffered job(s) before exit", waiting)
            return
        where = (
            f"kept in the spool {self.config.push_spool}, delivered by the next process "
            "that uses it"
            if self.config.push_spool
            else "LOST with this process (Config.push_spool keeps them across restarts; "
            "Client.flush(timeout) tells a program that must know)"
        )
        log.error(
            "%d job(s) NOT delivered: Redis at %s unreachable at exit; %s",
            left,
            safe_url(self.config.redis_url),
            where,
        )


def outgoing(jobs: Sequence[BufferedJob]) -> list[Outgoing]:
    """``jobs`` as ``push.lua`` takes them, for the sync and the asyncio write alike: each
    with its routing when it goes through the gate (ordering key, unique lock, tenant or
    priority)
    and its unique lock's window in milliseconds."""
    out = []
    now = time.time()
    for job in jobs:
        text = job.text
        if job.plain:  # known to have no routing field (rfetch.push.bulk_text)
            out.append(Outgoing(job.queue, text, job.at))
            continue
        routing = Routing.parse(text) if may_be_gated(text) or may_have_priority(text) else None
        if routing is None or not routing.gated:
            out.append(Outgoing(job.queue, job.text, job.at))
            continue
        window_ms = 1
        if routing.unique_until is not None:
            window_ms = max(1, int((routing.unique_until - now) * 1000))
        out.append(Outgoing(job.queue, job.text, job.at, routing, window_ms))
    return out


class AsyncSender:
    """:meth:`Delivery.write`'s round trip from asyncio code, on one event loop's client:
    the same ``push.lua`` call, built by the same code (:func:`outgoing`,
    :meth:`rfetch.store.commands.Commands.push_call`).

    Args:
        commands: ``push.lua`` on the asyncio client.
    """

    def __init__(self, commands: AsyncCommands) -> None:
        self.commands = commands
        self.keys = commands.keys

    async def send(
        self, jobs: Sequence[BufferedJob], max_sizes: Mapping[str, int] | None = None
    ) -> list[bool]:
        """Write ``jobs`` in one ``push.lua`` call, all or none; per job, whether written.
        ``max_sizes``: queue -> max_queue_size (see :meth:`Delivery._send`).

        Raises:
            QueueFull: a queue of ``max_sizes`` would pass its size; nothing was written.
            redis.exceptions.ResponseError: a key on the jobs' way holds another type, or
                Redis refuses writes; nothing was written.
            redis.exceptions.ConnectionError / TimeoutError / OSError: Redis is unreachable.
        """
        return await self.commands.push(outgoing(jobs), max_sizes)
