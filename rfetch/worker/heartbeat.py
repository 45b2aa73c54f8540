"""The heartbeat: the process hash, its busy threads, stats flush and remote signals.

Every ``heartbeat_interval`` seconds one pipelined round trip writes what Sidekiq 7's
launcher writes: counters, the busy threads, the ``<identity>`` hash (info, concurrency,
busy, beat, quiet, rss, rtt_us, and rfetch's busy_threads and busy_async) with a TTL,
membership of ``processes``, and it pops one remote signal from ``<identity>-signals``.
The busy threads go to both ``<identity>:work`` (read by Sidekiq 7 and 8's ``WorkSet``) and
``<identity>:workers`` (read by Sidekiq 6's ``Workers`` and its Web UI's Busy page), so
every Ruby Sidekiq on the same Redis sees them.
Sidekiq wraps this in MULTI and pings separately for ``rtt_us``; rfetch times the round
trip itself and skips the work hashes while no thread is busy, so an idle process costs
about one command per second for its heartbeat.

``concurrency`` and ``busy`` count the processor threads and the event loop's slots alike
(:mod:`rfetch.worker.capacity`), so busy never exceeds concurrency; ``concurrency`` is written in
``info`` (read by Sidekiq 7 and 8.0) and as a hash field (read by Sidekiq 8.1.2+).

The pipeline is not a transaction: when Redis refuses some of its commands (``OOM`` at
``maxmemory`` refuses HSET and SADD but not EXPIRE; a key of the wrong type refuses one
command), the others still run, so a live process keeps its heartbeat hash alive. Any
failure is handled by a :class:`~rfetch.guard.ThreadGuard` and the next beat comes at the
usual interval: the heartbeat thread never ends before the process does.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from redis.client import Pipeline
from redis.typing import EncodableT, FieldT

from rfetch.guard import ThreadGuard
from rfetch.version import __version__
from rfetch.worker.capacity import Capacity
from rfetch.worker.context import WorkerContext
from rfetch.worker.host import own_stamp
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.heartbeat")

REMOTE_SIGNALS = frozenset({"TSTP", "TERM", "TTIN", "USR1", "USR2"})


def rss_kb() -> int:
    """Resident set size of this process in KiB (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError, IndexError):
        return 0


class Heartbeat:
    """Writes this process's heartbeat.

    Args:
        context: config (interval, TTL, tag, labels, queues), client, key names, identity
            (``host:pid:hex``), work state (busy threads, quiet), counters to flush, and
            the error reporter (told once per kind of failure).
        on_signal: called with a signal name popped from the remote signal list.
        renew: queues on the pipeline the leases of running keyed jobs (ordering keys,
            ``ReliableFetch.write_leases``).
        extra_info: more fields of ``info`` (a swarm's worker: ``swarm``, the parent's
            ``host:pid``, and its ``slot``).
        capacity: threads and loop slots of the process (default: ``config.concurrency``
            threads and no loop).
    """

    def __init__(
        self,
        context: WorkerContext,
        on_signal: Callable[[str], None],
        renew: Callable[[Pipeline, list[UnitOfWork]], None] | None = None,
        extra_info: Mapping[str, str | int] | None = None,
        capacity: Capacity | None = None,
    ) -> None:
        config = context.config
        self.config = config
        self.capacity = capacity or Capacity(config.concurrency, 0)
        self.redis = context.redis
        self.identity = context.identity
        self.work = context.work
        self.stats = context.stats
        self.on_signal = on_signal
        self.renew = renew
        self.keys = context.keys
        self.started_at = time.time()
        self.guard = ThreadGuard("heartbeat", log, context.report, context.redis)
        self._rtt_us = 0  # round trip of the previous heartbeat, microseconds
        self._lock = threading.Lock()
        self._cleared = False
        self._work_written = False
        self._extra_info = dict(extra_info or {})
        self._info = json.dumps(self.info())
        self._queues = json.dumps([q.name for q in config.queues])

    def info(self) -> dict[str, Any]:
        """The ``info`` field: Sidekiq 7's process description, plus ``proc``: what names
        this process on its host (:class:`~rfetch.worker.host.ProcessStamp`), so that a
        worker started after it dies recovers its jobs at once."""
        hostname, pid, _ = self.identity.rsplit(":", 2)
        stamp = own_stamp() if int(pid) == os.getpid() else None
        info: dict[str, Any] = {
            "hostname": hostname,
            "started_at": self.started_at,
            "pid": int(pid),
            "tag": self.config.tag,
            "concurrency": self.capacity.total,
            "capsules": self.capacity.capsules(self.config),
            "queues": [q.name for q in self.config.queues],
            "weights": [{q.name: q.weight for q in self.config.queues}],
            "labels": list(self.config.labels),
            "identity": self.identity,
            "version": __version__,
            "embedded": False,
            **self._extra_info,
        }
        if stamp is not None:
            info["proc"] = stamp.to_info()
        return info

    def beat(self) -> bool:
        """Write one heartbeat. Never raises: a failure is logged once per kind (see
        :class:`~rfetch.guard.ThreadGuard`) and the counters are kept for the next beat.

        Returns:
            True if every command of the beat succeeded.
        """
        with self._lock:
            if self._cleared:
                return False
            try:
                self._beat()
            except Exception as exc:
                self.guard.failed(exc)
                return False
            self.guard.succeeded()
            return True

    def _beat(self) -> None:
        counts = self.stats.take()
        try:
            pipe = self.redis.pipeline(transaction=False)
            self.stats.queue_flush(pipe, counts)
            increments = [
                i for i, (args, _) in enumerate(pipe.command_stack) if "INCR" in str(args[0])
            ]
            running, busy = self.work.snapshot()
            self._queue_work(pipe, running)
            key = self.keys.process(self.identity)
            pipe.sadd(self.keys.processes, self.identity)
            pipe.hset(self.keys.identities, self.identity, self._queues)
            pipe.hset(
                key,
                mapping={
                    "info": self._info,
                    "concurrency": self.capacity.total,
                    "busy": busy.total,
                    "busy_threads": busy.threads,
                    "busy_async": busy.async_slots,
                    "beat": time.time(),
                    "rtt_us": self._rtt_us,
                    "quiet": "true" if self.work.quiet else "false",
                    "rss": rss_kb(),
                },
            )
            pipe.expire(key, self.config.heartbeat_ttl)
            pipe.rpop(self.keys.signals(self.identity))
            rtt_start = time.perf_counter()
            # Not raising on the first error: the commands after a refused one still ran,
            # and their replies (the popped signal) must not be lost.
            replies = pipe.execute(raise_on_error=False)
        except BaseException:
            self.stats.give_back(counts)  # not sent, or not known to be: next beat
            self._work_written = True
            raise
        self._rtt_us = int((time.perf_counter() - rtt_start) * 1_000_000)
        errors = [reply for reply in replies if isinstance(reply, Exception)]
        if increments and all(isinstance(replies[i], Exception) for i in increments):
            # Every counter refused (OOM): flush them next time. When only some were (a key
            # of the wrong type), the others counted and giving all back would count them
            # again at every beat: those counts are lost, as a killed process's are.
            self.stats.give_back(counts)
        self._work_written = bool(running) or bool(errors)
        if not isinstance(replies[-1], Exception):
            self._signal(replies[-1])
        if errors:
            raise errors[0]

    def _queue_work(self, pipe: Pipeline, running: dict[int, tuple[UnitOfWork, float]]) -> None:
        """Queue the busy threads on ``pipe``: both work hashes replaced (Sidekiq 7/8 read
        ``<identity>:work``, Sidekiq 6 ``<identity>:workers``), or deleted once idle."""
        work_keys = (self.keys.work(self.identity), self.keys.workers(self.identity))
        if running or self._work_written:
            pipe.unlink(*work_keys)
        if not running:
            return
        mapping: dict[FieldT, EncodableT] = {
            f"{tid:x}": json.dumps(
                {
                    "queue": unit.queue,
                    "payload": unit.raw.decode("utf-8", "replace"),
                    "run_at": int(run_at),
                }
            )
            for tid, (unit, run_at) in running.items()
        }
        for work_key in work_keys:
            pipe.hset(work_key, mapping=mapping)
            pipe.expire(work_key, self.config.heartbeat_ttl)
        if self.renew is not None:
            self.renew(pipe, [unit for unit, _ in running.values()])

    def _signal(self, reply: object) -> None:
        if not reply:
            return
        name = reply.decode() if isinstance(reply, bytes) else str(reply)
        if name in REMOTE_SIGNALS:
            log.info("remote signal %s", name)
            self.on_signal(name)
        else:
            log.warning("ignored unknown remote signal %r", name)

    def run(self, stop: threading.Event) -> None:
        """Beat every ``heartbeat_interval`` seconds until ``stop`` is set (the launcher
        beats once itself before it starts fetching). A failed beat is retried at the same
        interval, not later: the beat that comes through must come before the TTL ends."""
        while not stop.wait(self.config.heartbeat_interval):
            self.beat()

    def clear(self) -> None:
        """Flush counters and remove this process from ``processes`` (clean exit). A beat
        in flight finishes first, and none follows, so nothing re-adds the process."""
        with self._lock:
            self._cleared = True
            self._clear()

    def _clear(self) -> None:
        counts = self.stats.take()
        try:
            pipe = self.redis.pipeline(transaction=True)
            self.stats.queue_flush(pipe, counts)
            pipe.srem(self.keys.processes, self.identity)
            pipe.hdel(self.keys.identities, self.identity)
            pipe.unlink(
                self.keys.process(self.identity),
                self.keys.work(self.identity),
                self.keys.workers(self.identity),
                self.keys.started(self.identity),
            )
            pipe.execute()
        except Exception as exc:
            log.error("could not clear the heartbeat: %s", exc)


def make_identity() -> str:
    """``hostname:pid:<12 hex>``, Sidekiq's process identity."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(6).hex()}"
