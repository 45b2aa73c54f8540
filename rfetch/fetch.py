"""Reliable fetch (Sidekiq Pro's super_fetch), many jobs per round trip.

A fetched job is moved atomically from ``queue:<q>`` into this process's private list
``queue:sq|<identity>|<q>`` and stays there until it is acknowledged (LREM after success),
settled (moved into the retry or dead set by one conditional script), or pushed back.
Whatever happens to the process, every accepted job is in exactly one list or set.

Fetch order: one Lua call acknowledges finished jobs and moves up to N new ones, taking the
queues in weighted-random or strict order; when that finds nothing, one blocking BLMOVE
waits on the first queue of the order for ``block_timeout`` seconds, so an idle worker costs
about one command per second whatever its number of queues, and notices shutdown within
that time.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from redis import Redis
from redis.exceptions import ConnectionError, TimeoutError

from rfetch.config import Config
from rfetch.keys import Keys
from rfetch.scripts import Scripts

log = logging.getLogger("rfetch.fetch")

REDIS_DOWN = (ConnectionError, TimeoutError, OSError)
"""Errors that mean Redis could not be reached or did not answer."""

FAIR_REFRESH = 5.0
"""Seconds between looks at which queues are fair (``rfetch:fair-queues``)."""

FAIR_REFRESH_IDLE = 30.0
"""The same while the worker idles in a blocking fetch: one look every 5 s was a tenth of
an idle worker's Redis commands (issue #4). An idle worker of several queues still sees a
queue's first tenant job within ``block_timeout`` (its EXISTS covers every queue's tenant
ring); one of a single queue, within this time."""


@dataclass(eq=False)
class UnitOfWork:
    """One fetched job: where it came from and the exact bytes fetched (what LREM matches).

    Attributes:
        queue: queue name.
        raw: the payload exactly as fetched.
        private_key: the private list holding it until acknowledged.
        fetched_at: ``time.time()`` at fetch (float epoch seconds).
        jid: the job's jid, set by the processor for a gated job.
        ordering_key: the job's ordering key (issue #5), set by the processor; None for none.
        unique: the job's unique lock digest (issue #5), set by the processor; None for none.
    """

    queue: str
    raw: bytes
    private_key: str
    fetched_at: float = field(default_factory=time.time)
    jid: str = ""
    ordering_key: str | None = None
    unique: str | None = None

    @property
    def gated(self) -> bool:
        """Whether finishing the job must release an ordering key or a unique lock, so its
        acknowledgement goes through ``finish.lua`` instead of riding on the next fetch."""
        return self.ordering_key is not None or self.unique is not None

    def gate_args(self, prefix: str) -> list[str]:
        """``prefix, queue, ordering key, jid`` (``""`` for no key) for the gate scripts."""
        return [prefix, self.queue, self.ordering_key or "", self.jid]


class QueueOrder:
    """Sidekiq's queue order: strict as listed, or weighted random per fetch.

    With weights, each queue appears ``weight`` times in a list that is shuffled for every
    fetch and then de-duplicated (Sidekiq's BasicFetch#queues_cmd), so ``critical,2`` is
    first twice as often as a queue of weight 1.
    """

    def __init__(self, config: Config, rng: random.Random | None = None) -> None:
        self.strict = config.is_strict
        self.names = [q.name for q in config.queues]
        self._expanded = [q.name for q in config.queues for _ in range(q.weight)]
        self._rng = rng or random.Random()

    def next(self) -> list[str]:
        """The queue names in the order to try for one fetch."""
        if self.strict or len(self.names) == 1:
            return list(self.names)
        self._rng.shuffle(self._expanded)
        return list(dict.fromkeys(self._expanded))


class ReliableFetch:
    """Fetch, acknowledge, settle and push back jobs of one worker process.

    Args:
        config: supplies queues, weights and ``block_timeout`` (seconds).
        redis: the client (no automatic retries: see ``rfetch.connection``).
        identity: the process identity ``host:pid:hex``.
        scripts: the Lua scripts registered on ``redis``.
    """

    def __init__(self, config: Config, redis: Redis, identity: str, scripts: Scripts) -> None:
        self.config = config
        self.redis = redis
        self.identity = identity
        self.scripts = scripts
        self.keys = Keys(config.namespace)
        self.order = QueueOrder(config)
        self._private = {q.name: self.keys.private(identity, q.name) for q in config.queues}
        self._public = {q.name: self.keys.queue(q.name) for q in config.queues}
        self.broken: dict[str, str] = {}
        """Queues whose key holds another Redis type than a list: name -> type."""
        self.fair: frozenset[str] = frozenset()
        """This process's queues that have had tenant jobs (issue #5): fetched fairly."""
        self._fair_checked = float("-inf")

    def refresh_fair(self, force: bool = False, every: float = FAIR_REFRESH) -> frozenset[str]:
        """Which of this process's queues are fair (in ``rfetch:fair-queues``), looked up
        at most every ``every`` seconds (one SMISMEMBER; ``FAIR_REFRESH`` while fetching,
        ``FAIR_REFRESH_IDLE`` while idle), so a queue's first tenant job is fetched fairly
        within that time (an idle fetch on a fair queue also looks at the queue's public
        list).

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        now = time.monotonic()
        if not force and now - self._fair_checked < every:
            return self.fair
        self._fair_checked = now
        names = list(self._private)
        flags = self.redis.smismember(self.keys.fair_queues, names)
        self.fair = frozenset(n for n, f in zip(names, flags, strict=True) if f)
        return self.fair

    def private_key(self, queue: str) -> str:
        """This process's private list for ``queue``."""
        return self._private.get(queue) or self.keys.private(self.identity, queue)

    def retrieve_work(
        self,
        limit: int,
        exclude: Iterable[str] = (),
        acks: Sequence[UnitOfWork] = (),
    ) -> list[UnitOfWork]:
        """Acknowledge ``acks`` and move up to ``limit`` jobs into the private lists, in one
        Lua call (no blocking). Returns the jobs moved, oldest first.

        Args:
            limit: the most jobs to take (0: only acknowledge).
            exclude: queue names not to fetch from (paused queues).
            acks: finished jobs to remove from the private lists (LREM of the exact bytes);
                one with an ordering key or a unique lock also releases them (issue #5).

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable; the
                acknowledgements may or may not have been applied (repeating them is
                harmless), and a job may have been moved without our seeing it (see
                :meth:`requeue_unheld`).
        """
        skip = set(exclude)
        names = [q for q in self.order.next() if q not in skip]
        fetch_pairs = len(names) if limit > 0 else 0
        names += [q for q in self._private if q not in names]
        index = {name: i for i, name in enumerate(names, 1)}
        keys: list[str] = []
        for name in names:
            keys.append(self._public[name])
            keys.append(self._private[name])
        fair = self.refresh_fair() if fetch_pairs else frozenset()
        fair_pairs = [i for i, name in enumerate(names[:fetch_pairs], 1) if name in fair]
        for fair_pair in fair_pairs:
            fair_name = names[fair_pair - 1]
            keys += [
                self.keys.fair_ring(fair_name),
                self.keys.fair_credits(fair_name),
                self.keys.fair_weights(fair_name),
            ]
        args: list[bytes | str | int] = [limit, fetch_pairs, len(fair_pairs), *fair_pairs]
        for unit in acks:
            pair = index.get(unit.queue)
            if pair is None or self._private[unit.queue] != unit.private_key:
                self._ack_now(unit)
                continue
            if unit.gated:  # issue #5: the release rides on the fetch too
                args += [-pair, unit.raw, *unit.gate_args(self.keys.prefix), unit.unique or ""]
                continue
            args.append(pair)
            args.append(unit.raw)
        reply = self.scripts.fetch(keys=keys, args=args, client=self.redis)
        units = []
        broken: dict[str, str] = {}
        looked_at = int(reply[0])
        for i in range(1, len(reply), 2):
            pair = int(reply[i])
            if pair < 0:
                kind = reply[i + 1]
                broken[names[-pair - 1]] = kind.decode() if isinstance(kind, bytes) else kind
                continue
            name = names[pair - 1]
            units.append(UnitOfWork(name, reply[i + 1], self._private[name]))
        self._note_broken(broken, names[:looked_at])
        return units

    def _note_broken(self, broken: dict[str, str], looked_at: list[str]) -> None:
        """Log once when a queue key holds something other than a list, and when fixed."""
        for name, kind in broken.items():
            if name not in self.broken:
                log.error(
                    "%s is a Redis %s, not a list: queue %r is skipped until the key is fixed "
                    "(WRONGTYPE); the other queues go on",
                    self._public[name],
                    kind,
                    name,
                )
            self.broken[name] = kind
        for name in looked_at:
            if name in self.broken and name not in broken:
                del self.broken[name]
                log.info("%s is a list again: queue %r resumes", self._public[name], name)

    def wait_for_work(self, exclude: Iterable[str] = ()) -> list[UnitOfWork]:
        """Block up to ``block_timeout`` seconds on the first queue of the order (BLMOVE);
        on a fair queue (issue #5), BLPOP on its wake list then one fetch, so a plain job
        pushed into a fair queue waits up to ``block_timeout`` seconds when workers idle.

        Args:
            exclude: paused queue names.

        Returns:
            The one job moved, or an empty list after the timeout.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: as :meth:`retrieve_work`.
        """
        skip = set(exclude) | set(self.broken)
        names = [q for q in self.order.next() if q not in skip]
        if not names:
            time.sleep(self.config.block_timeout)
            return []
        first = names[0]
        if first in self.refresh_fair(every=FAIR_REFRESH_IDLE):
            # Tenant jobs are not in the public queue: wait for a tenant to join the ring,
            # then fetch (which also looks at the public queue) once either way.
            self.redis.blpop([self.keys.fair_wake(first)], self.config.block_timeout)
            return self.retrieve_work(1, exclude)
        raw = self.redis.blmove(
            self._public[first],
            self._private[first],
            self.config.block_timeout,  # type: ignore[arg-type]  # redis-py accepts float
            "RIGHT",
            "LEFT",
        )
        if raw is None:
            return []
        return [UnitOfWork(first, raw, self._private[first])]  # type: ignore[arg-type]

    def any_waiting(self, exclude: Iterable[str] = ()) -> bool:
        """Whether any queue (but ``exclude``) holds a job, plain or of a tenant: one EXISTS
        over every public queue and every tenant ring (an empty list does not exist in
        Redis), so an idle worker's cost does not grow with its number of queues (Sidekiq
        Pro's fetch polls every queue, issue #6394). Rings of queues not yet known to be
        fair are included, so a queue's first tenant job is seen too."""
        skip = set(exclude) | set(self.broken)
        keys = [self._public[q] for q in self._public if q not in skip]
        keys += [self.keys.fair_ring(q) for q in self._public if q not in skip]
        return bool(keys) and int(self.redis.exists(*keys)) > 0

    def _ack_now(self, unit: UnitOfWork) -> None:
        if unit.gated:
            self._finish(unit)
            return
        self.redis.lrem(unit.private_key, 1, unit.raw)  # type: ignore[arg-type]

    def _finish(self, unit: UnitOfWork) -> int:
        """``finish.lua``: LREM, then release the job's ordering key and unique lock."""
        return int(
            self.scripts.finish(
                keys=[unit.private_key],
                args=[unit.raw, *unit.gate_args(self.keys.prefix), unit.unique or ""],
                client=self.redis,
            )
        )

    def take_followers(self, unit: UnitOfWork, limit: int) -> list[bytes]:
        """Move up to ``limit`` waiting jobs of the running holder's key into its private
        list (``coalesce.lua``); returns their raw payloads, oldest first.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        if unit.ordering_key is None:
            return []
        taken: list[bytes] = self.scripts.coalesce(
            keys=[unit.private_key],
            args=[*unit.gate_args(self.keys.prefix), limit],
            client=self.redis,
        )
        return taken

    def write_leases(self, pipe: Redis, units: Iterable[UnitOfWork]) -> None:
        """Queue on ``pipe`` the leases of running keyed jobs (issue #5): the heartbeat
        calls it, so a running holder's lease (``rfetch:key-leases:<q>``, member
        ``<jid>:<key>``) expires ``heartbeat_ttl`` seconds after its process's last beat by
        Redis's clock. Stuck-key rescue looks only at expired leases."""
        keyed = [u for u in units if u.ordering_key is not None]
        if not keyed:
            return
        self.scripts.lease(
            keys=[self.keys.key_leases(u.queue) for u in keyed],
            args=[self.config.heartbeat_ttl, *(f"{u.jid}:{u.ordering_key}" for u in keyed)],
            client=pipe,
        )

    def acknowledge(self, unit: UnitOfWork, give_up: float | None = None) -> bool:
        """Remove a finished job from the private list (LREM of the exact bytes).

        A failed LREM is retried until Redis answers (Sidekiq #4495 left such jobs in the
        private list until the next restart).

        Args:
            unit: the job.
            give_up: ``time.monotonic()`` deadline after which to stop trying (shutdown);
                the job then stays in the private list and is recovered as an orphan.

        A job with an ordering key or a unique lock is acknowledged by ``finish.lua``, which
        also releases the key (its next job goes out) and the lock (issue #5).

        Returns:
            True once acknowledged, False if given up.
        """
        if unit.gated:
            finished = self._until_answered(lambda: self._finish(unit), "acknowledge", give_up)
            return finished is not None
        key, raw = unit.private_key, unit.raw
        lrem = self.redis.lrem
        answer = self._until_answered(
            lambda: lrem(key, 1, raw),  # type: ignore[arg-type]
            "acknowledge",
            give_up,
        )
        return answer is not None

    def settle(
        self,
        unit: UnitOfWork,
        zset: str,
        score: float,
        payload: bytes | str,
        trim_before: float | None = None,
        cap: int | None = None,
        give_up: float | None = None,
        outcome: str = "dead",
    ) -> bool:
        """Atomically move a failed job from the private list into the retry or dead set.

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
            outcome: for a job with an ordering key or a unique lock (issue #5):
                ``"retry"`` keeps its key blocked, ``"skip"`` releases the key (the skip
                policy), ``"dead"`` releases the key and the unique lock.

        Returns:
            True if written, False if the job was no longer ours or we gave up.
        """
        args: list[bytes | str] = [
            unit.raw,
            repr(score),
            payload,
            "" if trim_before is None else repr(trim_before),
            "" if cap is None else str(cap),
        ]
        if unit.gated:
            args += [*unit.gate_args(self.keys.prefix), outcome, unit.unique or ""]
        result = self._until_answered(
            lambda: self.scripts.settle(
                keys=[unit.private_key, zset], args=args, client=self.redis
            ),
            "settle",
            give_up,
        )
        return bool(result)

    def requeue(self, units: Sequence[UnitOfWork]) -> int:
        """Push jobs back to the head of their queues (next to run), if still ours.

        Jobs are grouped per private list; within a group the first given runs first. A job
        with an ordering key goes back by the gate's rule (``requeue.lua``), keeping order.

        Returns:
            How many jobs were pushed back.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable (the jobs
                stay in the private lists and are recovered as orphans).
        """
        groups: dict[tuple[str, str], list[bytes]] = {}
        for unit in units:
            groups.setdefault((unit.queue, unit.private_key), []).append(unit.raw)
        pushed = 0
        for (queue, private_key), raws in groups.items():
            pushed += int(
                self.scripts.requeue(
                    keys=[private_key, self.keys.queue(queue), self.keys.queues],
                    args=[queue, self.keys.prefix, *raws],
                    client=self.redis,
                )
            )
        return pushed

    def requeue_unheld(self, held: Iterable[UnitOfWork], why: str) -> int:
        """Push back every job in this process's private lists that no thread holds.

        Called after a Redis connection error (a move whose reply was lost leaves a job in
        a private list that nobody will run, issue #3), and at shutdown with nothing held.

        Args:
            held: the jobs this process has fetched and not yet finished.
            why: the reason, for the log line.

        Returns:
            How many jobs were pushed back.
        """
        held_count = Counter((u.private_key, u.raw) for u in held)
        stray: list[UnitOfWork] = []
        for queue, private_key in self._private.items():
            raws: list[bytes] = self.redis.lrange(private_key, 0, -1)  # type: ignore[assignment]
            for raw in reversed(raws):
                if held_count[(private_key, raw)] > 0:
                    held_count[(private_key, raw)] -= 1
                else:
                    stray.append(UnitOfWork(queue, raw, private_key))
        if not stray:
            return 0
        pushed = self.requeue(stray)
        if pushed:
            log.warning("pushed back %d job(s) from the private lists (%s)", pushed, why)
        return pushed

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

