"""One typed call per Lua script in ``rfetch/lua/``: the only code that knows each script's
KEYS and ARGV order (as BullMQ's ``Scripts`` class builds every script's arguments in one
function per script).

:class:`Commands` is built once per Redis client (worker, client and admin API each build
one) on the scripts :class:`rfetch.store.scripts.Scripts` registers. Every key a script
touches is passed in KEYS, except the derived keys each script's header names (a tenant's
list, and the queues ``enqueue_due.lua`` reads from its jobs); with a ``{tag}`` namespace
these share the namespace's hash slot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from redis import Redis
from redis.client import Pipeline
from redis.cluster import ClusterPipeline
from redis.commands.core import Script
from redis.exceptions import ResponseError
from redis.typing import EncodableT

from rfetch.payload import Routing
from rfetch.store.caps import cap_keys
from rfetch.store.keys import Keys
from rfetch.store.push_args import gate_keys, push_call, push_written, queue_full
from rfetch.store.replies import (
    DueReply,
    Fetched,
    FetchReply,
    FindReply,
    LeaderClaim,
    Outgoing,
    RequeueReply,
)
from rfetch.store.scripts import Scripts

Client = Redis | Pipeline


def queue_script(
    script: Script, pipe: Pipeline, *, keys: Sequence[str], args: Sequence[EncodableT]
) -> None:
    """Queue ``script`` on ``pipe`` (a MULTI/EXEC pipeline).

    redis-py's cluster pipeline refuses EVALSHA (it cannot load a missing script inside a
    transaction), and a promoted replica may lack a script the old master had, so on a
    Redis Cluster the script travels as EVAL with its text; all its keys are in one slot.
    """
    if isinstance(pipe, ClusterPipeline):
        pipe.execute_command("EVAL", script.script, len(keys), *keys, *args)
    else:
        script(keys=keys, args=args, client=pipe)
"""Where a script runs: the client itself, or a pipeline (queued, answered at execute)."""

Outcome = Literal["retry", "skip", "dead"]
"""What settling a keyed job does to its key: keep it blocked, release it, or release it
and drop the unique lock."""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Commands:
    """Every Lua script, registered on one Redis client, behind one method each.

    Args:
        redis: the client the scripts run on (a method's ``client`` may name a pipeline).
        keys: key names of the namespace.
    """

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self.scripts = Scripts.load(redis)

    # -- key blocks ----------------------------------------------------------------------

    def gate_keys(
        self, queue: str, ordering_key: str | None = None, unique: str | None = None
    ) -> list[str]:
        """The seven keys of ``queue``'s gate, in ``lib/gate.lua``'s G order, then the
        waiting list of ``ordering_key`` and the lock of ``unique`` when given."""
        return gate_keys(self.keys, queue, ordering_key, unique)

    # -- worker: fetch, acknowledge, settle, push back -----------------------------------

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

        Raises:
            KeyError: an acknowledgement's queue is not named.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        keys: list[str] = []
        for name in names:
            keys.append(public[name])
            keys.append(private[name])
        index = {name: i for i, name in enumerate(names, 1)}
        fair_pairs = [index[name] for name in fair]
        for name in fair:
            k = self.keys
            keys += [k.fair_ring(name), k.fair_credits(name), k.fair_weights(name)]
        cap_pairs = dict.fromkeys(index[name] for name in capped)
        gate: list[str] = []  # releasing acknowledgements' keys (gate, batch), after the caps'
        plain: list[bytes | str | int] = []
        slots: list[bytes | str | int] = []
        releasing: list[bytes | str | int] = []
        batched: list[bytes | str | int] = []
        batch_keys: list[str] = []
        for unit in acks:
            routing = unit.routing
            if routing is not None and routing.capped and not (
                routing.ordering_key or routing.unique or routing.bid
            ):
                slots += [index[unit.queue], unit.raw, routing.concurrency_key or ""]
                cap_pairs[index[unit.queue]] = None
            elif routing is not None and routing.locking:
                key, unique = routing.ordering_key, routing.unique
                releasing += [index[unit.queue], unit.raw, unit.queue, routing.jid]
                releasing += [key or "", unique or "", routing.concurrency_key or ""]
                releasing.append("1" if routing.bid else "")
                if routing.capped:
                    cap_pairs[index[unit.queue]] = None
                if key is not None or unique is not None:
                    gate += self.gate_keys(unit.queue, key, unique)
                if routing.bid:  # after its gate keys, in the releasing record's order
                    gate.append(self.keys.batch(routing.bid))
            elif routing is not None and routing.bid:
                batched += [index[unit.queue], unit.raw, routing.jid]
                batch_keys.append(self.keys.batch(routing.bid))
            else:
                plain.append(index[unit.queue])
                plain.append(unit.raw)
        for pair in cap_pairs:
            keys += cap_keys(self.keys, names[pair - 1])
        keys += gate
        if batch_keys or any(u.routing is not None and u.routing.bid for u in acks):
            keys += [*batch_keys, self.keys.prefix]
        args: list[bytes | str | int] = [limit, len(names), fetch_count, len(fair_pairs)]
        args += fair_pairs
        args.append(len(cap_pairs))
        fetched = {index[name] for name in capped}
        for pair in cap_pairs:
            args += [pair, 1 if pair in fetched else 0]
        args.append(len(plain) // 2)
        args += plain
        args.append(len(slots) // 3)
        args += slots
        args.append(len(releasing) // 8)
        args += releasing
        args.append(len(batched) // 3)
        args += batched
        looked_at, moved, broken = self.scripts.fetch(keys=keys, args=args, client=self.redis)
        return FetchReply(
            int(looked_at),
            [(int(moved[i]) - 1, moved[i + 1]) for i in range(0, len(moved), 2)],
            {int(broken[i]) - 1: _text(broken[i + 1]) for i in range(0, len(broken), 2)},
        )

    def finish(
        self,
        list_key: str,
        queue: str,
        raw: bytes,
        routing: Routing,
        client: Client | None = None,
        batch: Literal["ok", "dead"] | None = None,
        failure: str = "",
    ) -> bool:
        """``finish.lua``: LREM one job from ``list_key`` (a private list, or the public
        queue for an admin delete) and, if removed, release its ordering key (the key's next
        job goes out) and its unique lock, and count it in its batch.

        Args:
            queue: the queue of the key gate.
            routing: the job's routing fields.
            client: a pipeline to queue the call on (the reply is then the pipeline's).
            batch: for a batched job taken out of a private list: ``"ok"`` (it
                succeeded) or ``"dead"`` (it failed and is discarded); None counts nothing.
            failure: with ``"dead"``: the failure's JSON ``{"error_class", "error_message"}``.

        Returns:
            Whether the job was removed (always True on a pipeline).
        """
        keys = [list_key, *self.gate_keys(queue, routing.ordering_key, routing.unique)]
        args: list[bytes | str] = [
            raw, queue, routing.ordering_key or "", routing.jid, routing.unique or ""
        ]
        if routing.capped:
            keys += cap_keys(self.keys, queue)
        args.append(routing.concurrency_key or "")
        if batch is not None and routing.bid:
            keys += [self.keys.batch(routing.bid), self.keys.prefix]
            args += [batch, failure]
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
                key blocked, ``"skip"`` releases it, ``"dead"`` releases it and the lock.
            trim_before: dead set: drop entries scored below this (float epoch seconds).
            cap: dead set: keep at most this many entries.
            failure: a batched job's failure as JSON ``{"error_class", "error_message"}``.

        Returns:
            True if written, False if the job was no longer in the private list.
        """
        keys = [private_key, zset]
        args: list[bytes | str] = [
            raw,
            repr(score),
            payload,
            "" if trim_before is None else repr(trim_before),
            "" if cap is None else str(cap),
        ]
        if routing is not None and routing.locking:
            keys += self.gate_keys(queue, routing.ordering_key, routing.unique)
            args += [outcome, queue, routing.ordering_key or "", routing.jid]
            args.append(routing.unique or "")
            if routing.capped:
                keys += cap_keys(self.keys, queue)
                args.append(routing.concurrency_key or "")
        if routing is not None and routing.bid and zset in (self.keys.retry, self.keys.dead):
            # a failure or a death in its batch (an over-limit reschedule is neither)
            if not routing.locking:
                args += ["", "", "", "", ""]
            if not routing.capped:
                args.append("")
            keys += [self.keys.batch(routing.bid), self.keys.prefix]
            args += ["dead" if zset == self.keys.dead else "fail", routing.jid, failure]
        return bool(self.scripts.settle(keys=keys, args=args, client=self.redis))

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
        keys = [private_key, *self.gate_keys(queue)]
        args: list[bytes | str | int] = [queue, len(jobs)]
        cap_index = 0
        for raw, routing in jobs:
            if routing is None:
                args += [raw, "", "", "", 0, "", 0]
                continue
            list_index = 0
            if routing.ordering_key is not None:
                keys.append(self.keys.key_list(queue, routing.ordering_key))
                list_index = len(keys)
            if routing.capped and not cap_index:
                cap_index = len(keys) + 1
                keys += cap_keys(self.keys, queue)
            args += [raw, routing.jid, routing.ordering_key or "", routing.tenant or "", list_index]
            args += [routing.concurrency_key or "", cap_index if routing.capped else 0]
        pushed, left = self.scripts.requeue(keys=keys, args=args, client=self.redis)
        return RequeueReply(
            int(pushed),
            [(int(left[i]) - 1, _text(left[i + 1])) for i in range(0, len(left), 2)],
        )

    def coalesce(
        self, private_key: str, queue: str, ordering_key: str, jid: str, limit: int
    ) -> list[bytes]:
        """``coalesce.lua``: move up to ``limit`` waiting jobs of ``ordering_key`` into the
        private list of its running holder ``jid``; their raw payloads, oldest first (none
        if ``jid`` no longer holds the key)."""
        keys = [private_key, self.keys.key_holders(queue), self.keys.key_list(queue, ordering_key)]
        taken: list[bytes] = self.scripts.coalesce(
            keys=keys,
            args=[ordering_key, jid, limit],
            client=self.redis,
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

    # -- orphans, stuck keys, locks ------------------------------------------------------

    def recover(
        self,
        private_key: str,
        queue: str,
        raw: bytes,
        routing: Routing | None,
        jid: str,
        poison_max: int,
        window: int,
        counted: bool = True,
    ) -> str:
        """``recover.lua``: push one job of a dead process back to the head of ``queue``,
        counting recoveries of ``jid`` (Sidekiq Pro 5.2's poison pills).

        Args:
            jid: names the recovery counter (``"invalid"`` for an unparseable payload).
            poison_max: recoveries that make a poison pill.
            window: the counting window in seconds.
            counted: False for a job the dead process held but had not started: it is
                pushed back without counting or checking its recoveries.

        Returns:
            ``"requeued"``, ``"gone"`` (no longer in the private list) or ``"poison"``
            (nothing changed).
        """
        key = routing.ordering_key if routing is not None else None
        keys = [private_key, self.keys.recoveries(jid), *self.gate_keys(queue, key)]
        capped = routing is not None and routing.capped
        if capped:
            keys += cap_keys(self.keys, queue)
        args: list[bytes | str | int] = [
            raw,
            queue,
            poison_max if counted else 0,
            window,
            routing.jid if routing is not None else "",
            key or "",
            (routing.tenant or "") if routing is not None else "",
        ]
        if routing is not None and capped:
            args.append(routing.concurrency_key or "")
        return _text(self.scripts.recover(keys=keys, args=args, client=self.redis))

    def rescue(self, queue: str, ordering_key: str, jid: str, grace: float) -> bool:
        """``rescue.lua``: release ``ordering_key`` of ``queue`` if ``jid`` still holds it
        and its lease expired more than ``grace`` seconds ago by Redis's clock; a stale
        lease (``jid`` no longer holds the key) is only removed. True if released."""
        keys = self.gate_keys(queue, ordering_key)
        return bool(
            self.scripts.rescue(
                keys=keys, args=[queue, ordering_key, jid, grace], client=self.redis
            )
        )

    def unlock(self, lock_key: str, token: bytes | str) -> bool:
        """``unlock.lua``: delete ``lock_key`` only if it still holds ``token``."""
        return bool(self.scripts.unlock(keys=[lock_key], args=[token], client=self.redis))

    # -- scheduled and retry sets, push --------------------------------------------------

    def enqueue_due(self, zset: str, limit: int) -> DueReply:
        """``enqueue_due.lua``: move up to ``limit`` jobs of ``zset`` (schedule or retry)
        due by Redis's clock to their queues; how many were moved, and why due jobs were
        left in the set (a key on their way holds another type)."""
        k = self.keys
        moved, left = self.scripts.enqueue_due(
            keys=[zset, k.queues, k.dead, k.prefix], args=[limit], client=self.redis
        )
        return DueReply(int(moved), [_text(m) for m in left])

    def push(
        self, jobs: Sequence[Outgoing], max_sizes: Mapping[str, int] | None = None
    ) -> list[bool]:
        """``push.lua``: write ``jobs`` in push order, all or none: plain jobs to their
        queue or the scheduled set, jobs with an ordering key, a unique lock or a tenant
        through the gate.

        Args:
            max_sizes: queue name -> max_queue_size, checked for the jobs to run now.

        Returns:
            Per job, whether it was written (False: its unique lock was held).

        Raises:
            QueueFull: a queue of ``max_sizes`` would pass its size; nothing was written.
            redis.exceptions.ResponseError: a key on the jobs' way holds another type, or
                Redis refuses writes (out of memory, READONLY); nothing was written.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable (the
                call either wrote every job or none).
        """
        keys, args = self.push_call(jobs, max_sizes)
        try:
            reply = self.scripts.push(keys=keys, args=args, client=self.redis)
        except ResponseError as exc:
            raise queue_full(exc) from None
        return push_written(reply, len(jobs))

    def push_call(
        self, jobs: Sequence[Outgoing], max_sizes: Mapping[str, int] | None = None
    ) -> tuple[list[str], list[str | int]]:
        """``push.lua``'s KEYS and ARGV for ``jobs`` (see :func:`rfetch.store.push_args.
        push_call`), for this client and the asyncio one."""
        return push_call(self.keys, jobs, max_sizes)

    # -- admin API -----------------------------------------------------------------------

    def api_find(
        self, key: str, kind: Literal["list", "zset"], start: int, count: int, jids: Iterable[str]
    ) -> FindReply:
        """``api_find.lua``: entries of one window of a list (positions from the right end,
        0 runs next) or sorted set (ranks) whose top-level-looking jid is one of ``jids``
        (the caller checks the real jid)."""
        args = [kind, start, count, *jids]
        reply = self.scripts.api_find(keys=[key], args=args, client=self.redis)
        return FindReply(
            int(reply[0]),
            [
                (
                    int(reply[i]),
                    reply[i + 1],
                    float(reply[i + 2]) if reply[i + 2] not in (b"", "") else None,
                )
                for i in range(1, len(reply), 3)
            ],
        )

    def api_move(
        self,
        pipe: Pipeline,
        source: str,
        mode: Literal["queue", "dead", "delete"],
        entry: bytes,
        payload: bytes | str,
        routing: Routing | None,
        queue: str = "",
        score: float = 0.0,
        trim_before: float | None = None,
        cap: int | None = None,
        failure: str = "",
    ) -> None:
        """``api_move.lua`` queued on ``pipe``: ZREM ``entry`` from ``source`` and, if it
        was there, write ``payload`` to its queue (mode ``"queue"``, through the gate for a
        keyed or tenant job) or the dead set (mode ``"dead"``, trimmed as ``settle``), or
        nothing (``"delete"``); a keyed or unique job's key and lock are released by
        ``"dead"`` and ``"delete"``. The reply is 1 if moved, 0 if the entry was gone.

        Args:
            routing: routing fields of ``payload``; None for a plain or invalid entry.
            queue: mode "queue": the destination queue name.
            score: mode "dead": time of death, float epoch seconds.
            failure: mode "dead", a batched job: its failure as JSON (the kill is its
                death in its batch, counted in the same call).
        """
        k = self.keys
        destination = k.queue(queue) if mode == "queue" else k.dead
        keys = [source, destination, k.queues]
        args: list[bytes | str] = [
            mode,
            entry,
            payload,
            queue if mode == "queue" else repr(score),
            "" if trim_before is None else repr(trim_before),
            "" if cap is None else str(cap),
        ]
        if routing is not None and routing.gated:
            gate_queue = routing.queue
            # lib/gate.lua acts on a key or a tenant only with the payload's queue.
            key = routing.ordering_key if gate_queue else None
            tenant = routing.tenant if gate_queue else None
            keys += self.gate_keys(gate_queue, key, routing.unique)
            args += [gate_queue, key or "", routing.jid, routing.unique or "", tenant or ""]
            if routing.capped and gate_queue:
                keys += cap_keys(self.keys, gate_queue)
                args += [routing.concurrency_key or "", str(routing.concurrency_limit)]
        if mode == "dead" and routing is not None and routing.bid:  # a death in its batch
            if not routing.gated:
                keys += self.gate_keys(routing.queue)
                args += [routing.queue, "", routing.jid, "", ""]
            if not (routing.gated and routing.capped and routing.queue):
                args += ["", ""]
            keys += [k.batch(routing.bid), k.prefix]
            args += ["dead", routing.jid, failure]
        queue_script(self.scripts.api_move, pipe, keys=keys, args=args)

    # -- leader election and periodic jobs -----------------------------------------------

    def leader_claim(self, token: str, identity: str, ttl_ms: int) -> LeaderClaim:
        """``leader_claim.lua``: take the leader lease if nobody holds it, or renew it if
        ``token`` does, for ``ttl_ms`` milliseconds of Redis's clock."""
        k = self.keys
        status, holder, remaining, seconds, micros = self.scripts.leader_claim(
            keys=[k.leader, k.leader_changes, k.leader_wake], args=[token, ttl_ms, identity],
            client=self.redis,
        )
        return LeaderClaim(int(status), _text(holder), max(0, int(remaining)) / 1000,
                           int(seconds) + int(micros) / 1_000_000)

    def leader_resign(self, token: str, wake_ttl_ms: int) -> bool:
        """``leader_resign.lua``: give the lease up if ``token`` holds it and wake one
        follower (the element is kept ``wake_ttl_ms`` ms); True when it was held."""
        k = self.keys
        return bool(self.scripts.leader_resign(
            keys=[k.leader, k.leader_wake], args=[token, wake_ttl_ms], client=self.redis
        ))

    def periodic_sync(
        self, token: str, entries: Sequence[tuple[str, str, str]], removed: Sequence[str]
    ) -> list[int] | None:
        """``periodic_sync.lua``: write the leader's schedules (name, definition JSON,
        fingerprint), remove ``removed`` (names), and return each schedule's cursor (epoch
        seconds); None when ``token`` does not hold the lease."""
        k = self.keys
        keys = [k.leader, k.periodic, *(k.periodic_state(e[0]) for e in entries)]
        keys += [k.periodic_state(name) for name in removed]
        args: list[str | int] = [token, len(entries)]
        for entry in entries:
            args += entry
        args += removed
        cursors = self.scripts.periodic_sync(keys=keys, args=args, client=self.redis)
        return None if cursors is None else [int(float(_text(c))) for c in cursors]

    def periodic_push(
        self, token: str, name: str, tick: int, window: float, marker_ttl: int, queue: str,
        jid: str, payload: bytes, late: bool,
    ) -> str:
        """``periodic_push.lua``: push the job of tick ``tick`` (epoch seconds) of schedule
        ``name`` at most once; ``pushed``, ``paused``, ``done``, ``early``, ``stale`` or
        ``lost`` (see the script's header).

        Args:
            window: the catch-up window, seconds.
            marker_ttl: seconds the tick's marker is kept.
            late: the tick is pushed late (caught up).
        """
        k = self.keys
        keys = [k.leader, k.periodic_state(name), k.periodic_tick(name, tick), k.queue(queue),
                k.queues]
        args: list[bytes | str | int] = [token, tick, repr(float(window)), marker_ttl, queue,
                                         jid, payload, "1" if late else "0"]
        return _text(self.scripts.periodic_push(keys=keys, args=args, client=self.redis))

    def periodic_skip(self, token: str, name: str, through: int, count: int) -> str:
        """``periodic_skip.lua``: count ``count`` ticks of ``name`` as skipped and move its
        cursor to ``through`` (epoch seconds); ``skipped``, ``done`` or ``lost``."""
        k = self.keys
        answer = self.scripts.periodic_skip(
            keys=[k.leader, k.periodic_state(name)], args=[token, through, count],
            client=self.redis,
        )
        return _text(answer)
