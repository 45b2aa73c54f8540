"""The worker's script calls (:class:`JobCommands`): fetch and acknowledge, finish, settle a
failure into the retry or dead set, push back, coalesce waiting jobs, write leases. Part of
:class:`rfetch.store.commands.Commands`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from redis.client import Pipeline
from redis.typing import EncodableT

from rfetch.jobs.payload import Routing
from rfetch.store.command_base import Client, CommandBase, Outcome, queue_script, text
from rfetch.store.fetch_args import fetch_call
from rfetch.store.job_record import job_record, needs_record, put_back_record
from rfetch.store.outcomes import JobOutcome
from rfetch.store.replies import Fetched, FetchReply, RequeueReply


class JobCommands(CommandBase):
    """``fetch.lua``, ``finish.lua``, ``settle.lua``, ``requeue.lua``, ``coalesce.lua`` and
    ``lease.lua``, one typed method each."""

    def fetch(
        self,
        names: Sequence[str],
        public: Mapping[str, str],
        private: Mapping[str, str],
        fetch_count: int,
        limit: int,
        fair: Sequence[str],
        acks: Sequence[Fetched],
        capped: Sequence[str] = (),
        prio: Sequence[str] = (),
    ) -> FetchReply:
        """``fetch.lua``: acknowledge ``acks``, then move up to ``limit`` jobs from the
        first ``fetch_count`` queues of ``names`` into their private lists.

        Args:
            names: queue names in fetch order; every queue of an acknowledgement is named.
            public, private: queue name -> its public queue / this process's private list.
            fetch_count: how many of ``names``, from the first, to fetch from.
            limit: the most jobs to move (0: only acknowledge).
            fair: names among the first ``fetch_count`` that are fetched fairly (tenants).
            acks: finished jobs, each in ``private[job.queue]``; one whose routing holds a
                key, a unique lock or a fetch cap's slot also releases them.
            capped: names among the first ``fetch_count`` that have had capped jobs: their
                ready ring of concurrency keys is fetched from too (fetch caps).
            prio: names among the first ``fetch_count`` that have had priority jobs: their
                priority set is fetched from too, highest priority first
                (``lua/lib/priority.lua``).

        Raises:
            KeyError: an acknowledgement's queue is not named.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        keys, args = fetch_call(
            self.keys, names, public, private, fetch_count, limit, fair, acks, capped, prio
        )
        return self.fetch_reply(self.scripts.fetch(keys=keys, args=args, client=self.redis))

    def fetch_command(
        self,
        names: Sequence[str],
        public: Mapping[str, str],
        private: Mapping[str, str],
        limit: int,
        fair: Sequence[str],
        capped: Sequence[str] = (),
        prio: Sequence[str] = (),
    ) -> tuple[EncodableT, ...]:
        """:meth:`fetch` of every queue of ``names`` with no acknowledgement, as one
        command's parts (``FCALL`` or ``EVALSHA``) for a caller that sends it itself, and
        reads its reply with :meth:`fetch_reply`."""
        keys, args = fetch_call(
            self.keys, names, public, private, len(names), limit, fair, (), capped, prio
        )
        return self.scripts.fetch.command(keys, args)

    def mark_fetched_command(
        self, private_keys: Sequence[str], started_key: str, slot: str
    ) -> tuple[EncodableT, ...]:
        """``mark_fetched.lua`` as one command's parts, pipelined right behind a blocking
        fetch into ``private_keys`` (in queue order): the first job at a list's left end
        not marked yet, marked started under ``slot`` in ``started_key``; the reply is
        that job's payload (None: there is none)."""
        return self.scripts.mark_fetched.command([*private_keys, started_key], [slot])

    @staticmethod
    def fetch_reply(reply: list[Any]) -> FetchReply:
        """A ``fetch.lua`` reply, parsed."""
        looked_at, moved, broken = reply
        return FetchReply(
            int(looked_at),
            [(int(moved[i]) - 1, moved[i + 1]) for i in range(0, len(moved), 2)],
            {int(broken[i]) - 1: text(broken[i + 1]) for i in range(0, len(broken), 2)},
        )

    def finish(
        self,
        list_key: str,
        queue: str,
        raw: bytes,
        routing: Routing,
        client: Client | None = None,
        outcome: JobOutcome = JobOutcome.DELETED,
        failure: str = "",
        in_set: bool = False,
    ) -> bool:
        """``finish.lua``: LREM one job from ``list_key`` (a private list, or the public
        queue for an admin delete) and, if removed, end it as ``outcome`` says
        (``lua/lib/outcome.lua``: its ordering key, unique lock and cap slot, its batch).

        Args:
            queue: the queue of the key gate.
            routing: the job's routing fields.
            client: a pipeline to queue the call on (the reply is then the pipeline's).
            outcome: how it ended: ``SUCCEEDED``, a death that is not kept (``DISCARDED``,
                ``EXPIRED``, ``CANCELLED``), or ``DELETED`` (an admin delete: no batch
                event).
            failure: for a death: the failure's JSON ``{"error_class", "error_message"}``.
            in_set: ``list_key`` is the queue's priority set (an admin delete: ZREM).

        Returns:
            Whether the job was removed (always True on a pipeline).
        """
        args: list[bytes | str] = [raw, job_record(queue, routing), outcome.value, failure]
        if in_set:
            args.append("zset")
        keys = [list_key, self.keys.prefix]
        return bool(self.scripts.finish(keys=keys, args=args, client=client or self.redis))

    def settle(
        self,
        private_key: str,
        queue: str,
        raw: bytes,
        zset: str,
        score: float,
        payload: bytes | str,
        routing: Routing | None,
        outcome: Outcome = "dead",
        trim_before: float | None = None,
        cap: int | None = None,
        failure: str = "",
    ) -> bool:
        """``settle.lua``: atomically take a failed job out of its private list and into the
        retry or dead set, only if it is still there (Sidekiq #4112), counting a batched
        job's failure (retry set) or death (dead set) in its batch in the same call.

        Args:
            private_key: the private list holding ``raw``.
            queue: the job's queue (its key gate).
            raw: the payload exactly as fetched.
            zset: key of the retry or dead set.
            score: next retry time or time of death (float epoch seconds).
            payload: the JSON to store.
            routing: the job's routing fields; None for a plain or unparseable job.
            outcome: for a job with an ordering key or a unique lock: ``"retry"`` keeps the
                key blocked, ``"skip"`` releases it, ``"dead"`` releases it and the lock;
                ``"poison"`` as ``"dead"``, named as a poison pill.
            trim_before: dead set: drop entries scored below this (float epoch seconds).
            cap: dead set: keep at most this many entries.
            failure: a batched job's failure as JSON ``{"error_class", "error_message"}``.

        Returns:
            True if written, False if the job was no longer in the private list.
        """
        keys = [private_key, zset, self.keys.prefix]
        args: list[bytes | str] = [
            raw,
            repr(score),
            payload,
            "" if trim_before is None else repr(trim_before),
            "" if cap is None else str(cap),
            job_record(queue, routing) if needs_record(routing) else "",
            self._settled(zset, outcome).value,
            failure,
        ]
        return bool(self.scripts.settle(keys=keys, args=args, client=self.redis))

    def _settled(self, zset: str, outcome: Outcome) -> JobOutcome:
        """The outcome of a job settled into ``zset`` (the retry, dead or schedule set) with
        ``outcome`` (what happens to its ordering key)."""
        if zset == self.keys.dead:
            return JobOutcome.POISON if outcome == "poison" else JobOutcome.DIED
        if zset == self.keys.retry:
            kept = {"retry": JobOutcome.FAILED, "skip": JobOutcome.SKIPPED}
            return kept.get(outcome, JobOutcome.DIED)
        return JobOutcome.RESCHEDULED if outcome == "retry" else JobOutcome.DELETED

    def requeue(
        self, private_key: str, queue: str, jobs: Sequence[tuple[bytes, Routing | None]]
    ) -> RequeueReply:
        """``requeue.lua``: push jobs still in ``private_key`` back to the head of
        ``queue`` (the first given runs first), a keyed or tenant job by the gate's
        push-back rule.

        Args:
            jobs: (raw payload, routing fields or None) of each job.

        Returns:
            How many jobs were pushed back (those still in the private list), and the jobs
            left in the private list because a key on their way holds another type.
        """
        keys = [private_key, self.keys.prefix]
        args: list[bytes | str | int] = [queue, len(jobs)]
        for raw, routing in jobs:
            args += [raw, put_back_record(queue, raw, routing)]
        pushed, left = self.scripts.requeue(keys=keys, args=args, client=self.redis)
        return RequeueReply(
            int(pushed),
            [(int(left[i]) - 1, text(left[i + 1])) for i in range(0, len(left), 2)],
        )

    def coalesce(
        self, private_key: str, queue: str, ordering_key: str, jid: str, limit: int
    ) -> list[bytes]:
        """``coalesce.lua``: move up to ``limit`` waiting jobs of ``ordering_key`` into the
        private list of its running holder ``jid``; their raw payloads, oldest first (none
        if ``jid`` no longer holds the key)."""
        holder = job_record(queue, Routing(jid=jid, ordering_key=ordering_key))
        taken: list[bytes] = self.scripts.coalesce(
            keys=[private_key, self.keys.prefix], args=[holder, limit], client=self.redis
        )
        return taken

    def lease(self, pipe: Pipeline, held: Sequence[tuple[str, str, str]], ttl: float) -> None:
        """``lease.lua`` queued on ``pipe``: write the leases of running keyed jobs, each
        expiring ``ttl`` seconds from now by Redis's clock.

        Args:
            held: (queue, jid, ordering key) of each running keyed job.
        """
        queue_script(
            self.scripts.lease,
            pipe,
            keys=[self.keys.key_leases(queue) for queue, _, _ in held],
            args=[ttl, *(f"{jid}:{key}" for _, jid, key in held)],
        )
