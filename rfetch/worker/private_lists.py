"""The private lists of one worker process (Sidekiq Pro's super_fetch): every way a
fetched job leaves them. A fetched job stays in ``queue:sq|<identity>|<q>`` until it is
acknowledged (LREM after success), settled (moved into the retry or dead set by one
conditional script), or pushed back; whatever happens to the process, every accepted job is
in exactly one list or set. Fetching into them is :class:`rfetch.worker.fetch.ReliableFetch`'s.

A write that fails because Redis is unreachable is retried until Redis answers (Sidekiq
#4495 left such jobs in the private list until the next restart), or until a shutdown's
deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence

from redis.client import Pipeline

from rfetch.jobs.payload import Routing
from rfetch.store.commands import Outcome
from rfetch.store.connection import REDIS_DOWN
from rfetch.store.outcomes import JobOutcome
from rfetch.worker.context import WorkerContext
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.fetch")


class PrivateLists:
    """Acknowledge, settle and push back the jobs of one worker process's private lists.

    Args:
        context: config (queues, ``heartbeat_ttl`` and the poison-pill limits), the Lua
            scripts on a client with no automatic retries (see
            :func:`rfetch.store.connection.connect`), key names and the process identity
            ``host:pid:hex``.
    """

    def __init__(self, context: WorkerContext) -> None:
        config = self.config = context.config
        self.commands = context.commands
        self.redis = context.redis
        self.keys = context.keys
        self.identity = context.identity
        self._private = {q.name: self.keys.private(self.identity, q.name) for q in config.queues}

    def private_key(self, queue: str) -> str:
        """This process's private list for ``queue``."""
        return self._private.get(queue) or self.keys.private(self.identity, queue)

    def _ack_now(
        self, unit: UnitOfWork, failure: str | None = None, outcome: JobOutcome | None = None
    ) -> bool:
        """LREM of the exact bytes, or ``finish.lua`` for a job whose removal releases an
        ordering key or a unique lock, or counts in a batch: ended as ``outcome`` (None:
        succeeded, or with ``failure`` discarded)."""
        routing = unit.routing
        if routing is not None and (routing.locking or routing.batched):
            if outcome is None:
                outcome = JobOutcome.SUCCEEDED if failure is None else JobOutcome.DISCARDED
            return self.commands.finish(
                unit.private_key, unit.queue, unit.raw, routing, None, outcome, failure or ""
            )
        # From the right end, where the oldest jobs are (as fetch.lua's acknowledgements).
        return bool(self.redis.lrem(unit.private_key, -1, unit.raw))  # type: ignore[arg-type]

    def holds(self, unit: UnitOfWork) -> bool:
        """Whether ``unit`` is still in its private list (one LPOS of the exact bytes,
        retried until Redis answers): False once orphan recovery has pushed it back after
        this process looked dead (its heartbeat expired during a stall), so it must not be
        started here.

        Used before starting a job that waited long enough for its process to have been
        stalled past ``heartbeat_ttl`` (see :class:`rfetch.worker.manager.Manager`).
        """
        return (
            self._until_answered(
                lambda: self.redis.lpos(unit.private_key, unit.raw),  # type: ignore[arg-type]
                "ownership check",
                None,
            )
            is not None
        )

    def write_leases(self, pipe: Pipeline, units: Iterable[UnitOfWork]) -> None:
        """Queue on ``pipe`` the leases of running keyed jobs: the heartbeat calls it, so a
        running holder's lease (``rfetch:key-leases:<q>``, member ``<jid>:<key>``) expires
        ``heartbeat_ttl`` seconds after its process's last beat by Redis's clock. Stuck-key
        rescue looks only at expired leases."""
        held = [
            (u.queue, u.routing.jid, u.routing.ordering_key)
            for u in units
            if u.routing is not None and u.routing.ordering_key is not None
        ]
        if held:
            self.commands.lease(pipe, held, self.config.heartbeat_ttl)

    def acknowledge(
        self,
        unit: UnitOfWork,
        give_up: float | None = None,
        failure: str | None = None,
        outcome: JobOutcome | None = None,
    ) -> bool:
        """Remove a finished job from the private list (LREM of the exact bytes; a job with
        an ordering key or a unique lock by ``finish.lua``, which also releases the key, so
        its next job goes out, and the lock).

        A failed call is retried until Redis answers (Sidekiq #4495 left such jobs in the
        private list until the next restart).

        Args:
            unit: the job.
            give_up: ``time.monotonic()`` deadline after which to stop trying (shutdown);
                the job then stays in the private list and is recovered as an orphan.
            failure: None when the job succeeded; for a failed job that is discarded, its
                failure as JSON (a batched job then counts as dead in its batch).
            outcome: how it ended (``lua/lib/outcome.lua``), when not ``SUCCEEDED`` or,
                with ``failure``, ``DISCARDED``: ``EXPIRED``, ``CANCELLED``.

        Returns:
            True if this call removed the job; False if it was no longer in the private
            list (pushed back or settled meanwhile) or we gave up.
        """
        return bool(
            self._until_answered(
                lambda: self._ack_now(unit, failure, outcome), "acknowledge", give_up
            )
        )

    def settle(
        self,
        unit: UnitOfWork,
        zset: str,
        score: float,
        payload: bytes | str,
        trim_before: float | None = None,
        cap: int | None = None,
        give_up: float | None = None,
        outcome: Outcome = "dead",
        failure: str = "",
    ) -> bool:
        """Atomically move a failed job from the private list into the retry or dead set
        (``settle.lua``).

        Retried until Redis answers. Writes nothing if the job is no longer in the private
        list (it was pushed back meanwhile), so a job is never both requeued and retried
        (Sidekiq #4112).

        Args:
            unit: the job.
            zset: key of the retry or dead set.
            score: next retry time or time of death (float epoch seconds).
            payload: the JSON to store.
            trim_before: dead set: drop entries scored below this (epoch seconds).
            cap: dead set: keep at most this many entries.
            give_up: ``time.monotonic()`` deadline (see :meth:`acknowledge`).
            outcome: for a job with an ordering key or a unique lock: ``"retry"`` keeps its
                key blocked, ``"skip"`` releases the key (the skip policy), ``"dead"``
                releases the key and the unique lock.
            failure: a batched job's failure as JSON (its batch's failure info).

        Returns:
            True if written, False if the job was no longer ours or we gave up.
        """
        result = self._until_answered(
            lambda: self.commands.settle(
                unit.private_key,
                unit.queue,
                unit.raw,
                zset,
                score,
                payload,
                unit.routing,
                outcome,
                trim_before,
                cap,
                failure,
            ),
            "settle",
            give_up,
        )
        return bool(result)

    def requeue(self, units: Sequence[UnitOfWork]) -> int:
        """Push jobs back to the head of their queues (next to run), if still ours.

        Jobs are grouped per private list; within a group the first given runs first. A job
        with an ordering key goes back by the gate's rule (``requeue.lua``), keeping order.

        A job one of whose keys on the way back holds another Redis type stays in the
        private list (nothing is changed for it) and is logged; the others go back.

        Returns:
            How many jobs were pushed back.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable (the jobs
                stay in the private lists and are recovered as orphans).
        """
        groups: dict[tuple[str, str], list[tuple[bytes, Routing | None]]] = {}
        for unit in units:
            groups.setdefault((unit.queue, unit.private_key), []).append((unit.raw, unit.routing))
        pushed = 0
        for (queue, private_key), jobs in groups.items():
            reply = self.commands.requeue(private_key, queue, jobs)
            pushed += reply.pushed
            if reply.left:
                log.error(
                    "%d job(s) of queue %s NOT pushed back, they stay in the private list %s "
                    "(pushed back again at the next try, or recovered as orphans): %s",
                    len(reply.left),
                    queue,
                    private_key,
                    reply.left[0][1],
                )
        return pushed

    def push_back_counted(self, unit: UnitOfWork, counter: str) -> str:
        """Push a job back to the head of its queue as orphan recovery does
        (``recover.lua``), counting the push-backs of ``counter`` (a jid) against
        ``poison_max_recoveries`` within ``poison_window`` seconds.

        Returns:
            ``"requeued"``, ``"gone"`` (no longer in its private list) or ``"poison"`` (the
            count is reached: nothing changed, the caller sends it to the dead set).

        Raises:
            redis.exceptions.ResponseError: Redis refused (a key on the job's way holds
                another type, out of memory, READONLY); nothing changed.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable (the
                push-back may have happened; the job is then in its queue, not lost).
        """
        return self.commands.recover(
            unit.private_key,
            unit.queue,
            unit.raw,
            unit.routing,
            counter,
            self.config.poison_max_recoveries,
            int(self.config.poison_window),
        )

    def _until_answered(
        self, call: Callable[[], object], what: str, give_up: float | None
    ) -> object:
        delay = 0.05
        warned = False
        while True:
            try:
                return call()
            except REDIS_DOWN as exc:
                if not warned:
                    log.warning("%s failed, retrying until Redis answers: %s", what, exc)
                    warned = True
                if give_up is not None and time.monotonic() + delay > give_up:
                    log.error("%s abandoned at shutdown; the job stays in its private list", what)
                    return None
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
