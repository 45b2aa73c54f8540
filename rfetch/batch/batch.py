"""``rfetch.Batch``: a set of jobs with callbacks that fire once (Sidekiq Pro batches).

The jobs pushed inside ``with batch.jobs():`` are held in memory and written, with their
registration in the batch, by one ``batch_push.lua`` call when the block ends: a block that
raises writes nothing (no half batch). Each job's outcome is counted by the Lua call that
acknowledges it, puts it in the retry set or buries it (``lib/batch.lua``), so each callback
is pushed exactly once, by that call. See docs/workflows.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from redis.exceptions import ResponseError

from rfetch.batch.callbacks import EVENTS, CallbackSpec, Event, callback_fields
from rfetch.batch.status import BatchStatus
from rfetch.errors import BatchError, BatchNotFound, ConfigError
from rfetch.jobs.payload import new_jid
from rfetch.push.batch_context import Collector, close_block, collecting, open_block, running_bid
from rfetch.push.client import DEFAULT, Client
from rfetch.push.delivery import outgoing
from rfetch.push.shards import shard_of
from rfetch.store.batch_commands import BatchCommands

BATCH_TTL = 30 * 24 * 3600
"""Seconds a batch's keys live until it succeeds (Sidekiq Pro: 30 days)."""

SUCCESS_TTL = 24 * 3600
"""Seconds a batch's keys live after it succeeded (Sidekiq Pro: 24 hours)."""


class Batch:
    """A new batch (Sidekiq Pro's ``Sidekiq::Batch``), or an existing one to add jobs to
    (:meth:`reopen`, and ``self.batch`` inside a running batched job).

    Args:
        description: shown by the web UI, the CLI and the callbacks' status.
        on_success: callback pushed once when every job has succeeded (and every child
            batch has): a job class, an ``@rfetch.job`` function, or ``(class, options)``.
            Its ``perform(self, status, options)`` gets the batch's status as a dict
            (``bid``, ``description``, ``total``, ``pending``, ``failures``,
            ``failed_jids`` (the first 1,000), ``created_at`` float epoch s, ``parent_bid``,
            ``complete``) and ``options``.
        on_complete: pushed once when every job has run at least once, succeeded or failed
            (pending <= failures, Sidekiq Pro's rule), and every child batch completed.
        on_death: pushed once when a job of the batch (or of a child batch) dies: dead set,
            or discarded after a failure (``retry=False``, ``dead=False``, a discarding
            ``retry_in``, a cancel).
        parent: bid of the parent batch (its success then waits for this batch's). Default:
            the batch of the running job, when created inside a batched job.
        ttl: seconds the batch's keys live until it succeeds (default 30 days).
        success_ttl: seconds they live after success (default 24 hours).
        client: the client to push with (default: the process-wide one).

    Raises:
        ConfigError: a callback is not a job class, its options are not a JSON dict, its
            ``perform`` does not take ``(status, options)``, or a TTL is not positive.
    """

    def __init__(
        self,
        description: str = "",
        *,
        on_success: CallbackSpec | None = None,
        on_complete: CallbackSpec | None = None,
        on_death: CallbackSpec | None = None,
        parent: str | None = None,
        ttl: int = BATCH_TTL,
        success_ttl: int = SUCCESS_TTL,
        client: Client | None = None,
    ) -> None:
        for name, value in (("ttl", ttl), ("success_ttl", success_ttl)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"Batch {name} must be a whole number of seconds >= 1")
        if not isinstance(description, str):
            raise ConfigError("Batch description must be a string")
        self.bid = new_jid()
        self.description = description
        self.parent = parent if parent is not None else running_bid()
        self.ttl = ttl
        self.client = client
        self.jids: list[str] = []
        self._created = False
        self._fields: dict[str, str] = {"description": description, "success_ttl": str(success_ttl)}
        specs: Mapping[Event, CallbackSpec | None] = {
            "success": on_success, "complete": on_complete, "death": on_death
        }
        for event in EVENTS:
            spec = specs[event]
            if spec is not None:
                self._fields.update(callback_fields(self._client(), event, spec))

    @classmethod
    def reopen(cls, bid: str, client: Client | None = None, ttl: int = BATCH_TTL) -> Batch:
        """The existing batch ``bid``, to add jobs to with :meth:`jobs` (Sidekiq Pro's
        ``Sidekiq::Batch.new(bid)``). Nothing is read now: the ``jobs()`` block raises
        :class:`BatchNotFound` if the batch does not exist, :class:`BatchError` if it has
        succeeded."""
        batch = cls.__new__(cls)
        batch.bid, batch.description, batch.parent = bid, "", None
        batch.ttl, batch.client, batch.jids = ttl, client, []
        batch._created, batch._fields = True, {}
        return batch

    def _client(self) -> Client:
        return self.client if self.client is not None else DEFAULT.get()

    @contextmanager
    def jobs(self) -> Iterator[Batch]:
        """Jobs pushed inside the block (``perform_async``, ``perform_in``,
        ``perform_bulk``, their ``aperform_*`` forms, with any client) join this batch;
        they are written, with the batch, when the block ends, in one atomic call. A push
        inside returns its jid at once (a unique job whose lock turns out to be held is
        left out of the batch).

        Raises:
            BatchError: the first block of a new batch pushed no job (an empty batch is an
                error: nothing would ever fire), the batch has succeeded, or its parent
                does not exist or has succeeded; nothing was written.
            BatchNotFound: adding to a batch that does not exist (or expired).
            ConfigError: a ``jobs()`` block is already open in this context (blocks do not
                nest: create a child batch inside a job of the parent), or the jobs are on
                several shards.
            BatchError: Redis refused the write (a key of another type, out of memory,
                READONLY); nothing was written.
            QueueFull: a queue's ``max_queue_size`` would be passed; nothing was written.
            redis.exceptions.ConnectionError, TimeoutError: Redis is unreachable; nothing
                was written, or everything (a batch is not kept in the reliable-push
                buffer).
            Whatever the block raises: nothing is written.
        """
        if collecting() is not None:
            raise ConfigError(
                "batch jobs() blocks do not nest: create the child batch inside a job of the "
                "parent batch, or pass parent= after the parent's block"
            )
        collector = Collector(self.bid)
        token = open_block(collector)
        try:
            yield self
        finally:
            close_block(token)
        self._write(collector)

    def _write(self, collector: Collector) -> None:
        if not collector.jobs:
            if self._created:
                return
            raise BatchError(
                "a new batch's first jobs() block pushed no job; an empty batch is an error "
                "(its callbacks would never fire)"
            )
        client = self._client()
        shards = {shard_of(client.config, job.queue) for job in collector.jobs}
        if client.config.shards and len(shards) > 1:
            raise ConfigError("the jobs of a batch must all be on one shard (shard_map)")
        delivery = client.deliveries[shards.pop() if client.config.shards else 0]
        commands = BatchCommands(delivery.commands)
        jids = [_jid_of(job.text) for job in collector.jobs]

        def send(jobs: Any) -> list[bool]:
            try:
                return commands.push(
                    self.bid, "add" if self._created else "new", self.ttl,
                    None if self._created else self.parent, self._fields, outgoing(jobs), jids,
                    client.config.max_queue_size,
                )
            except ResponseError as exc:
                raise _batch_error(self.bid, exc) from exc

        written = client.route(collector.jobs, send)
        self._created = True
        if written is None:
            written = [True] * len(jids)
        self.jids += [jid for jid, ok in zip(jids, written, strict=True) if ok]

    def status(self) -> BatchStatus:
        """The batch's status now (:class:`rfetch.BatchStatus`)."""
        return BatchStatus(self.bid, client=self.client)


def _jid_of(text: str) -> str:
    jid = json.loads(text).get("jid")
    return jid if isinstance(jid, str) else ""


def _batch_error(bid: str, exc: ResponseError) -> BatchError:
    """The error of a refused ``batch_push.lua`` call (its replies start ``ERR batch:``,
    which redis-py gives without the ``ERR``)."""
    message = str(exc).removeprefix("ERR ")
    if message.startswith("batch: "):
        if "does not exist" in message and "parent" not in message:
            return BatchNotFound(f"batch {bid} does not exist (it expired, or was never created)")
        return BatchError(message.removeprefix("batch: "))
    return BatchError(f"Redis refused the batch's jobs, nothing was written: {message}")
