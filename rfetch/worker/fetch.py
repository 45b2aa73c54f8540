"""Reliable fetch (Sidekiq Pro's super_fetch), many jobs per round trip.

A fetched job is moved atomically from ``queue:<q>`` into this process's private list
``queue:sq|<identity>|<q>`` and stays there until it is acknowledged, settled or pushed
back (:mod:`rfetch.worker.private_lists`, the base class: every way a job leaves them).

Fetch order: one Lua call (``fetch.lua``, through :meth:`Commands.fetch`) acknowledges
finished jobs and moves up to N new ones, taking the queues in weighted-random or strict
order; when that finds nothing, one blocking BLMOVE waits on the first queue of the order for
``block_timeout`` seconds, so an idle worker costs about one command per second whatever its
number of queues, and notices shutdown within that time. A worker of several queues is
woken meanwhile by a job pushed to any other of them (:mod:`rfetch.worker.wake`): the
blocking command ends and one fetch takes the queues in order.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from rfetch.jobs.payload import Routing
from rfetch.store.cluster import node_client
from rfetch.store.replies import FetchReply
from rfetch.worker.context import WorkerContext
from rfetch.worker.outcome import settle_recorded
from rfetch.worker.private_lists import PrivateLists
from rfetch.worker.queue_order import QueueOrder
from rfetch.worker.unit import UnitOfWork
from rfetch.worker.wake import Waker

log = logging.getLogger("rfetch.fetch")

FAIR_REFRESH = 5.0
"""Seconds between looks at which queues are fair (``rfetch:fair-queues``)."""

FAIR_REFRESH_IDLE = 30.0
"""The same while the worker idles in a blocking fetch: one look every 5 s was a tenth of
an idle worker's Redis commands. An idle worker still sees a queue's first tenant, capped
or priority job within ``block_timeout``: after each blocking fetch that found nothing, one
EXISTS over the stages not yet known (:meth:`ReliableFetch.new_stages`) forces the look."""


class ReliableFetch(PrivateLists):
    """Fetch the jobs of one worker process into its private lists (and, by
    :class:`PrivateLists`, acknowledge, settle and push them back).

    Args:
        context: config (queues, weights, ``block_timeout`` and ``heartbeat_ttl``,
            seconds), the Lua scripts on a client with no automatic retries (see
            :func:`rfetch.store.connection.connect`), key names and the process identity
            ``host:pid:hex``.
    """

    def __init__(self, context: WorkerContext) -> None:
        super().__init__(context)
        self.order = QueueOrder(context.config)
        self._public = {q.name: self.keys.queue(q.name) for q in context.config.queues}
        self.broken: dict[str, str] = {}
        """Queues whose key holds another Redis type than a list: name -> type."""
        self.fair: frozenset[str] = frozenset()
        """This process's queues that have had tenant jobs: fetched fairly."""
        self.capped: frozenset[str] = frozenset()
        """This process's queues that have had capped jobs: their ready ring of concurrency
        keys is fetched from too (fetch caps)."""
        self.prio: frozenset[str] = frozenset()
        """This process's queues that have had priority jobs (``rfetch:prio-queues``): their
        priority set is fetched from too (``lua/lib/priority.lua``)."""
        self._fair_checked = float("-inf")
        self.waker = Waker(context) if len(context.config.queues) > 1 else None
        """Ends the blocking fetch for a job pushed to another queue (None: one queue)."""
        self.started = self.keys.started(self.identity)
        """This process's start marks (:mod:`rfetch.worker.started`)."""

    def unit(self, queue: str, raw: bytes, private_key: str | None = None) -> UnitOfWork:
        """The unit of work of a job in ``private_key`` (default: this process's private
        list of ``queue``), its routing fields read from ``raw``."""
        return UnitOfWork(
            queue, raw, private_key or self.private_key(queue),
            Routing.parse(raw, fetched=True), self
        )

    def refresh_fair(self, force: bool = False, every: float = FAIR_REFRESH) -> frozenset[str]:
        """Which of this process's queues are fair (in ``rfetch:fair-queues``), looked up
        at most every ``every`` seconds (one SMISMEMBER; ``FAIR_REFRESH`` while fetching,
        ``FAIR_REFRESH_IDLE`` while idle), so a queue's first tenant job is fetched fairly
        within that time. The same look (one more SMISMEMBER and one HMGET in the same
        round trip) sets :attr:`capped` from ``rfetch:cap-queues`` and :attr:`prio` from
        ``rfetch:prio-queues``.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        now = time.monotonic()
        if not force and now - self._fair_checked < every:
            return self.fair
        self._fair_checked = now
        names = list(self._private)
        pipe = self.redis.pipeline(transaction=False)
        pipe.smismember(self.keys.fair_queues, names)
        pipe.smismember(self.keys.cap_queues, names)
        pipe.hmget(self.keys.prio_queues, names)
        flags, caps, prio = pipe.execute()
        self.fair = frozenset(n for n, f in zip(names, flags, strict=True) if f)
        self.capped = frozenset(n for n, f in zip(names, caps, strict=True) if f)
        self.prio = frozenset(n for n, f in zip(names, prio, strict=True) if f is not None)
        return self.fair

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
                one with an ordering key or a unique lock also releases them.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable; the
                acknowledgements may or may not have been applied (repeating them is
                harmless), and a job may have been moved without our seeing it (see
                :meth:`requeue_unheld`).
        """
        if self.waker is not None:
            self.waker.look()
        acks = settle_recorded(acks)  # store_result jobs: complete.lua, one pipeline
        skip = set(exclude)
        names = [q for q in self.order.next() if q not in skip]
        fetch_count = len(names) if limit > 0 else 0
        names += [q for q in self._private if q not in names]
        own = self._private
        sent = []
        for unit in acks:
            if own.get(unit.queue) == unit.private_key:
                sent.append(unit)
            else:  # not one of this process's private lists: on its own
                self._ack_now(unit)
        fair = self.refresh_fair() if fetch_count else frozenset()
        reply = self.commands.fetch(
            names,
            self._public,
            own,
            fetch_count,
            limit,
            [name for name in names[:fetch_count] if name in fair],
            sent,
            [name for name in names[:fetch_count] if name in self.capped],
            [name for name in names[:fetch_count] if name in self.prio],
        )
        return self._units(names, reply)

    def _units(self, names: list[str], reply: FetchReply) -> list[UnitOfWork]:
        """The units of the jobs a fetch moved (``names``: the queues as sent)."""
        units = [self.unit(names[i], raw, self._private[names[i]]) for i, raw in reply.jobs]
        self._note_broken(
            {names[i]: kind for i, kind in reply.broken.items()}, names[: reply.looked_at]
        )
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

    def wait_for_work(
        self, exclude: Iterable[str] = (), mark_slot: str | None = None
    ) -> tuple[list[UnitOfWork], bool]:
        """Block up to ``block_timeout`` seconds on the first queue of the order (BLMOVE);
        on a fair queue, BLPOP on its wake list then one fetch. With several queues a
        wake-up (:mod:`rfetch.worker.wake`: a job pushed to another queue, or a plain job to
        a fair one) ends the wait, and one fetch (in queue order) follows at once.

        Args:
            exclude: paused queue names.
            mark_slot: the start-mark slot of the thread that will run the job it gets
                (:class:`rfetch.worker.started.StartMarks`): Redis marks that job
                (``mark_fetched.lua``) right behind the BLMOVE of a worker of one queue, or
                behind the fetch a wake-up appends on a worker of several.

        Returns:
            (the one job moved, or none after the timeout; whether the first job was marked
            started under ``mark_slot``).

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: as :meth:`retrieve_work`.
        """
        skip = set(exclude) | set(self.broken)
        names = [q for q in self.order.next() if q not in skip]
        if not names:
            time.sleep(self.config.block_timeout)
            return [], False
        first = names[0]
        fair = self.refresh_fair(every=FAIR_REFRESH_IDLE)
        if first in fair or first in self.capped or first in self.prio:
            # Tenant, capped and priority jobs are not in the public queue: wait for a wake
            # token, then fetch (which also looks at the public queue) once either way.
            self._block(None, "BLPOP", self.keys.fair_wake(first), self.config.block_timeout)
            return self.retrieve_work(1, exclude), False
        command = ("BLMOVE", self._public[first], self._private[first], "RIGHT", "LEFT",
                   self.config.block_timeout)
        if self.waker is None:
            raw, marked = self._block_and_mark(command, mark_slot)
            if raw is None and self.new_stages([first]):
                # its first tenant, capped or priority job
                return self.retrieve_work(1, exclude), False
            return ([], False) if raw is None else (
                [self.unit(first, raw, self._private[first])], marked)
        return self._wait_woken(first, command, exclude, mark_slot)

    def _wait_woken(
        self, first: str, command: Sequence[Any], exclude: Iterable[str], mark_slot: str | None
    ) -> tuple[list[UnitOfWork], bool]:
        """:meth:`wait_for_work` of a worker of several queues: the BLMOVE of ``first``,
        which a wake-up ends, appending the fetch of one job in queue order and the start
        mark of the job this thread will run (``mark_fetched.lua``)."""
        assert self.waker is not None
        order = [q for q in self.order.next() if q not in set(exclude)]
        client = self._node()
        follows = []
        if client is self.redis:  # not a cluster: the fetch's keys are on this server
            follows.append(self.commands.fetch_command(
                order, self._public, self._private, 1, *self._kinds(order)))
            if mark_slot is not None:
                follows.append(self.commands.mark_fetched_command(
                    [self._private[q] for q in order], self.started, mark_slot))
        raw, followed = self.waker.blocking_then_all(client, first, command, follows)
        units = [] if raw is None else [self.unit(first, raw, self._private[first])]
        if followed is not None and followed[0] is not None:
            units += self._units(order, self.commands.fetch_reply(followed[0]))
            mark = followed[1] if len(followed) > 1 else None
            return units, bool(units) and mark is not None and mark == units[0].raw
        if raw is None and self.waker.woken():
            return self.retrieve_work(1, exclude), False  # in this thread: no hand-off
        return units, False

    def _block_and_mark(self, command: Sequence[Any], slot: str | None) -> tuple[Any, bool]:
        """The BLMOVE ``command`` with, when ``slot`` is given (and not on a Redis Cluster,
        whose marks are plain ``HSET`` calls), ``mark_fetched.lua`` pipelined behind it on
        the same connection: (the BLMOVE's reply, whether the job it moved is marked under
        ``slot``). A mark Redis refused (the library not loaded yet) leaves the marking to
        the thread."""
        if slot is None or self._node() is not self.redis:
            return self.redis.execute_command(*command), False  # type: ignore[no-untyped-call]
        pipe = self.redis.pipeline(transaction=False)
        pipe.execute_command(*command)
        pipe.execute_command(*self.commands.mark_fetched_command([command[2]], self.started, slot))
        raw, marked = pipe.execute(raise_on_error=False)
        if isinstance(raw, Exception):
            raise raw
        return raw, raw is not None and marked == raw

    def _kinds(self, names: list[str]) -> tuple[list[str], list[str], list[str]]:
        """Of ``names``: the fair ones, the capped ones and those with priority jobs."""
        return ([n for n in names if n in self.fair], [n for n in names if n in self.capped],
                [n for n in names if n in self.prio])

    def _node(self) -> Any:
        """The client of the server holding the queues (a cluster's node client)."""
        return node_client(self.redis, self._public[next(iter(self._public))])

    def _block(self, queue: str | None, *args: object) -> Any:
        """A blocking command, which a wake-up can end (:meth:`Waker.blocking_call`)."""
        if self.waker is None:
            return self.redis.execute_command(*args)  # type: ignore[no-untyped-call]
        return self.waker.blocking_call(self._node(), queue, *args)

    def any_waiting(self, exclude: Iterable[str] = ()) -> bool:
        """Whether any queue (but ``exclude``) holds a job, plain or of a stage (tenant,
        cap, priority): one round trip, an EXISTS over every public queue and every stage
        known to be used (an empty list does not exist in Redis), so an idle worker's cost
        does not grow with its number of queues (Sidekiq Pro's fetch polls every queue,
        Sidekiq #6394), and :meth:`new_stages`'s EXISTS, so a queue's first tenant, capped
        or priority job is seen, and fetched, too."""
        if self.waker is not None:
            self.waker.look()
        names = [q for q in self._public if q not in set(exclude) and q not in self.broken]
        keys = [self._public[q] for q in names]
        keys += [self.keys.fair_ring(q) for q in names if q in self.fair]
        keys += [self.keys.cap_ring(q) for q in names if q in self.capped]
        keys += [self.keys.prio(q) for q in names if q in self.prio]
        new = self._new_stage_keys(names)
        pipe = self.redis.pipeline(transaction=False)
        for group in (keys, new):
            if group:
                pipe.exists(*group)
        found = [int(n) > 0 for n in pipe.execute()] if keys or new else []
        if new and found[-1]:
            self.refresh_fair(force=True)
        return any(found)

    def _new_stage_keys(self, names: list[str]) -> list[str]:
        """The keys of the stages (a tenant ring, a cap ring, a priority set) of ``names``
        not yet known to hold jobs (:meth:`refresh_fair`)."""
        keys = [self.keys.fair_ring(q) for q in names if q not in self.fair]
        keys += [self.keys.cap_ring(q) for q in names if q not in self.capped]
        keys += [self.keys.prio(q) for q in names if q not in self.prio]
        return keys

    def new_stages(self, names: list[str]) -> bool:
        """Whether a queue of ``names`` not yet known to have tenant, capped or priority
        jobs (:meth:`refresh_fair`) now has its first: one EXISTS over those stages' keys
        (an idle worker's look after each ``block_timeout``; :meth:`any_waiting` makes the
        same look in its round trip). If so, the look is refreshed at once, so the fetch
        that follows takes the job (without this, an idle worker saw a queue's first such
        job only at the next ``FAIR_REFRESH_IDLE`` look).

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        keys = self._new_stage_keys(names)
        if not keys or int(self.redis.exists(*keys)) == 0:
            return False
        self.refresh_fair(force=True)
        return True

    def take_followers(self, unit: UnitOfWork, limit: int) -> list[UnitOfWork]:
        """Move up to ``limit`` waiting jobs of the running holder's key into its private
        list (``coalesce.lua``); their units, oldest first.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        routing = unit.routing
        if routing is None or routing.ordering_key is None:
            return []
        raws = self.commands.coalesce(
            unit.private_key, unit.queue, routing.ordering_key, routing.jid, limit
        )
        return [self.unit(unit.queue, raw, unit.private_key) for raw in raws]

    def requeue_unheld(self, held: Iterable[UnitOfWork], why: str) -> int:
        """Push back every job in this process's private lists that no thread holds.

        Called after a Redis connection error (a move whose reply was lost leaves a job in
        a private list that nobody will run), and at shutdown with nothing held.

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
                    stray.append(self.unit(queue, raw, private_key))
        if not stray:
            return 0
        pushed = self.requeue(stray)
        if pushed:
            log.warning("pushed back %d job(s) from the private lists (%s)", pushed, why)
        return pushed
