"""The heartbeat: the process hash, its busy threads, stats flush and remote signals.

Every ``heartbeat_interval`` seconds one pipelined round trip writes what Sidekiq 7's
launcher writes: counters, the ``<identity>:work`` hash, the
``<identity>`` hash (info, busy, beat, quiet, rss, rtt_us) with a TTL, membership of
``processes``, and it pops one remote signal from ``<identity>-signals``. Sidekiq wraps
this in MULTI and pings separately for ``rtt_us``; rfetch times the round trip itself and
skips the work hash while no thread is busy, so an idle process costs about 0.5 commands
per second for its heartbeat (rfetch's idle-cost target).
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

from redis import Redis
from redis.client import Pipeline

from rfetch.config import Config
from rfetch.stats import Stats
from rfetch.store.connection import REDIS_DOWN
from rfetch.store.keys import Keys
from rfetch.version import __version__
from rfetch.worker.unit import UnitOfWork
from rfetch.worker.work_state import WorkState

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
        config: interval, TTL, tag, labels, queues.
        redis: the client.
        keys: key names of the namespace.
        identity: ``host:pid:hex``.
        work: busy threads and quiet state of this process.
        stats: counters to flush.
        on_signal: called with a signal name popped from the remote signal list.
        renew: queues on the pipeline the leases of running keyed jobs (ordering keys,
            ``ReliableFetch.write_leases``).
        extra_info: more fields of ``info`` (a swarm's worker: ``swarm``, the parent's
            ``host:pid``, and its ``slot``).
    """

    def __init__(
        self,
        config: Config,
        redis: Redis,
        keys: Keys,
        identity: str,
        work: WorkState,
        stats: Stats,
        on_signal: Callable[[str], None],
        renew: Callable[[Pipeline, list[UnitOfWork]], None] | None = None,
        extra_info: Mapping[str, str | int] | None = None,
    ) -> None:
        self.config = config
        self.redis = redis
        self.identity = identity
        self.work = work
        self.stats = stats
        self.on_signal = on_signal
        self.renew = renew
        self.keys = keys
        self.started_at = time.time()
        self._failing = False
        self._rtt_us = 0  # round trip of the previous heartbeat, microseconds
        self._lock = threading.Lock()
        self._cleared = False
        self._work_written = False
        self._extra_info = dict(extra_info or {})
        self._info = json.dumps(self.info())
        self._queues = json.dumps([q.name for q in config.queues])

    def info(self) -> dict[str, Any]:
        """The ``info`` field: Sidekiq 7's process description."""
        hostname, pid, _ = self.identity.rsplit(":", 2)
        return {
            "hostname": hostname,
            "started_at": self.started_at,
            "pid": int(pid),
            "tag": self.config.tag,
            "concurrency": self.config.concurrency,
            "queues": [q.name for q in self.config.queues],
            "weights": [{q.name: q.weight for q in self.config.queues}],
            "labels": list(self.config.labels),
            "identity": self.identity,
            "version": __version__,
            "embedded": False,
            **self._extra_info,
        }

    def beat(self) -> None:
        """Write one heartbeat; Redis errors are logged and counts kept for the next one."""
        with self._lock:
            if not self._cleared:
                self._beat()

    def _beat(self) -> None:
        counts = self.stats.take()
        try:
            running = self.work.running()
            pipe = self.redis.pipeline(transaction=False)
            self.stats.queue_flush(pipe, counts)
            work_key = self.keys.work(self.identity)
            if running or self._work_written:
                pipe.unlink(work_key)
            if running:
                pipe.hset(
                    work_key,
                    mapping={
                        f"{tid:x}": json.dumps(
                            {
                                "queue": unit.queue,
                                "payload": unit.raw.decode("utf-8", "replace"),
                                "run_at": int(run_at),
                            }
                        )
                        for tid, (unit, run_at) in running.items()
                    },
                )
                pipe.expire(work_key, self.config.heartbeat_ttl)
                if self.renew is not None:
                    self.renew(pipe, [unit for unit, _ in running.values()])
            key = self.keys.process(self.identity)
            pipe.sadd(self.keys.processes, self.identity)
            pipe.hset(self.keys.identities, self.identity, self._queues)
            pipe.hset(
                key,
                mapping={
                    "info": self._info,
                    "busy": len(running),
                    "beat": time.time(),
                    "rtt_us": self._rtt_us,
                    "quiet": "true" if self.work.quiet else "false",
                    "rss": rss_kb(),
                },
            )
            pipe.expire(key, self.config.heartbeat_ttl)
            pipe.rpop(self.keys.signals(self.identity))
            rtt_start = time.perf_counter()
            signal_name = pipe.execute()[-1]
            self._rtt_us = int((time.perf_counter() - rtt_start) * 1_000_000)
            self._work_written = bool(running)
        except REDIS_DOWN as exc:
            self.stats.give_back(counts)
            if not self._failing:
                log.error("heartbeat failed, Redis unreachable: %s", exc)
                self._failing = True
            return
        if self._failing:
            log.info("heartbeat restored")
            self._failing = False
        if signal_name:
            name = signal_name.decode() if isinstance(signal_name, bytes) else str(signal_name)
            if name in REMOTE_SIGNALS:
                log.info("remote signal %s", name)
                self.on_signal(name)
            else:
                log.warning("ignored unknown remote signal %r", name)

    def run(self, stop: threading.Event) -> None:
        """Beat every ``heartbeat_interval`` seconds until ``stop`` is set (the launcher
        beats once itself before it starts fetching)."""
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
            pipe.unlink(self.keys.process(self.identity), self.keys.work(self.identity))
            pipe.execute()
        except REDIS_DOWN as exc:
            log.error("could not clear the heartbeat: %s", exc)


def make_identity() -> str:
    """``hostname:pid:<12 hex>``, Sidekiq's process identity."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(6).hex()}"
