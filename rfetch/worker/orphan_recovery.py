"""Orphan recovery: jobs left in the private lists of dead processes go back to their queues.

Sidekiq Pro recovers orphans only when a process starts, so users wait hours (Sidekiq
#5540, #6951). Here every worker checks periodically (``orphan_check_interval``, jittered),
and one process at a time does the work, under a Redis lock.

A process is dead when its heartbeat hash has expired (``heartbeat_ttl``). It is reaped
only at a second look, at least two heartbeat intervals after the first by Redis's clock,
and only if its heartbeat is still missing then: a Redis freeze expires every heartbeat at
once, but live workers beat again before the second look (Sidekiq #4611 recovered jobs a
live process was running). With the defaults (5 s beats, 20 s TTL, checks every 5-15 s)
a killed process's jobs are back in their queues within 20 + 15 + 10.5 = 45.5 s, and a live
process is reaped only after it wrote no heartbeat for 20 + 10 = 30 s (docs/guarantees.md).

At start-up, a worker also recovers at once, without waiting for any TTL, the private lists
of processes of its own host that no longer exist (:meth:`OrphanRecovery.recover_host`, as
Sidekiq Pro's super_fetch does at start-up): the common case of systemd restarting a
worker killed by the OOM killer or kill -9.

Each job is moved by ``recover.lua`` atomically. A job recovered ``poison_max_recoveries``
times within ``poison_window`` is a poison pill (it likely kills its worker): it goes to the
dead set instead (Sidekiq Pro 5.2), by the same path as a job whose retries are exhausted
(:meth:`rfetch.worker.retry.JobRetry.kill`). After each check, stuck ordering keys are
rescued (:mod:`rfetch.worker.key_rescue`).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Iterable
from typing import Any

from redis.exceptions import ResponseError

from rfetch.config import Config
from rfetch.errors import POISON_PILL_CLASS, InvalidJob
from rfetch.guard import ThreadGuard
from rfetch.jobs.payload import Payload, loads
from rfetch.worker.context import WorkerContext
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.host import ProcessStamp, is_gone, own_stamp
from rfetch.worker.key_rescue import KeyRescue
from rfetch.worker.retry import JobRetry
from rfetch.worker.started import started_payloads
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.recovery")

POISON_ERROR_CLASS = POISON_PILL_CLASS


def recovery_bound(config: Config) -> float:
    """The most seconds from a kill -9 to its jobs being back in their queues, when another
    worker runs (the arithmetic of docs/guarantees.md):

    * the heartbeat hash expires at most ``heartbeat_ttl`` after the kill (it was written
      at most then);
    * the next check of some worker comes at most ``1.5 x orphan_check_interval`` later;
    * the second look comes ``2 x heartbeat_interval + 0.5`` after the first.

    Defaults: 20 + 15 + 10.5 = 45.5 s (plus the moves themselves).
    """
    return (
        config.heartbeat_ttl
        + 1.5 * config.orphan_check_interval
        + 2 * config.heartbeat_interval
        + 0.5
    )


def stall_tolerance(config: Config) -> float:
    """The fewest seconds a live process must go without a successful heartbeat before it
    can be reaped: its hash must expire (``heartbeat_ttl`` after its last beat) and still be
    missing at a second look ``2 x heartbeat_interval`` later. Defaults: 20 + 10 = 30 s."""
    return config.heartbeat_ttl + 2 * config.heartbeat_interval


class OrphanRecovery:
    """Finds dead processes and recovers their jobs.

    Args:
        context: config (intervals, poison-pill limits, ``on_recovery``), the Lua
            scripts with their client and key names, the error reporter, and this
            process's identity (never reaped by itself).
        fetch: builds the units of work of a dead process's jobs (their acknowledgement
            and settling).
        job_retry: sends poison pills to the dead set.
        rng: random source for the jitter.

    After each check it releases stuck ordering keys (:class:`KeyRescue`).
    """

    def __init__(
        self,
        context: WorkerContext,
        fetch: ReliableFetch,
        job_retry: JobRetry,
        rng: random.Random | None = None,
    ) -> None:
        config = self.config = context.config
        commands = self.commands = context.commands
        self.redis = commands.redis
        self.keys = commands.keys
        self.fetch = fetch
        self.job_retry = job_retry
        self.rescue = KeyRescue(config, commands)
        report = self.report = context.report
        self.identity = context.identity
        self.rng = rng or random.Random()
        self._last_full_scan: float | None = None
        self.guard = ThreadGuard(
            "orphan recovery",
            log,
            report,
            commands.redis,
            first=min(1.0, config.orphan_check_interval),
            cap=config.orphan_check_interval,
        )

    # -- schedule ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Check at start-up, then every jittered interval, until ``stop`` is set. A failed
        check is retried sooner (1 s, doubling up to the interval); no error ends the loop."""
        wait = min(2.0, self.config.orphan_check_interval)
        while not stop.wait(wait):
            wait = self.check_safely()

    def next_wait(self, suspects_pending: bool) -> float:
        """Seconds to the next check: two heartbeats while a suspect awaits its second
        look, else the interval randomised to [0.5x, 1.5x]."""
        if suspects_pending:
            return 2 * self.config.heartbeat_interval + 0.5
        base = self.config.orphan_check_interval
        return base * self.rng.random() + base / 2

    def check_safely(self) -> float:
        """:meth:`check`, with any error logged once per kind (:class:`ThreadGuard`) instead
        of raised; returns the seconds to wait before the next check."""
        try:
            pending = self.check()
        except Exception as exc:
            return self.guard.failed(exc)
        self.guard.succeeded()
        return self.next_wait(pending)

    def recover_host(self) -> int:
        """Reap at once the processes of this host that no longer exist (start-up).

        A process of this host (same host name in its identity) whose heartbeat still
        carries its :class:`~rfetch.worker.host.ProcessStamp` is gone when no process has
        its pid any more, or the one that has it started at another moment. Processes of
        another boot or pid namespace, or whose heartbeat has expired, are left to the
        periodic check. Errors are logged, never raised (the periodic check follows).

        Returns:
            How many jobs were pushed back.
        """
        try:
            return self._recover_host()
        except Exception as exc:
            log.error("start-up recovery of this host's dead processes failed: %r", exc)
            return 0

    def _recover_host(self) -> int:
        mine = own_stamp()
        if mine is None:
            return 0
        host = self.identity.rsplit(":", 2)[0]
        known = {
            _text(k): v for k, v in self.redis.hgetall(self.keys.identities).items()
        }
        names = [i for i in known if i != self.identity and i.rsplit(":", 2)[0] == host]
        if not names:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for identity in names:
            pipe.hget(self.keys.process(identity), "info")
        recovered = 0
        for identity, info in zip(names, pipe.execute(), strict=True):
            stamp = _stamp(info)
            if stamp is not None and is_gone(stamp, mine):
                log.info("process %s of this host no longer exists; recovering now", identity)
                recovered += self.reap(identity, json.loads(known[identity]))
        return recovered

    # -- one check -----------------------------------------------------------------------

    def check(self) -> bool:
        """One look for dead processes, under the recovery lock.

        Returns:
            True if some process is suspected dead and awaits its second look.
        """
        lock_ttl = max(30, int(self.config.network_timeout * 6))
        if not self._lock(lock_ttl):
            return False
        try:
            return self._check_locked()
        finally:
            self.commands.unlock(self.keys.recovery_lock, self.identity)

    def _lock(self, ttl: int) -> bool:
        """Take the recovery lock for ``ttl`` seconds; True if this process holds it.

        A SET whose reply was lost (a timeout while Redis was frozen) may have set the lock
        to this identity although the call raised, and an unlock may have failed the same
        way. The lock is then ours: take it up again rather than make every process wait
        out its TTL, which is far longer than a short ``orphan_check_interval``.

        A lock held by a process whose heartbeat is gone (it died while recovering, e.g.
        killed by the poison pill it was recovering) is broken at once, so recovery is not
        stalled for the lock's TTL. The lock only saves work: recover.lua moves a job only
        if it is still in the private list, so two recoveries at once never run a job twice.
        """
        if self.redis.set(self.keys.recovery_lock, self.identity, nx=True, ex=ttl):
            return True
        holder = self.redis.get(self.keys.recovery_lock)
        if holder is None:
            return False
        if _text(holder) == self.identity:
            return True
        if self.redis.exists(self.keys.process(_text(holder))):
            return False
        log.info("breaking the recovery lock of %s, whose heartbeat is gone", _text(holder))
        self.commands.unlock(self.keys.recovery_lock, holder)
        return bool(self.redis.set(self.keys.recovery_lock, self.identity, nx=True, ex=ttl))

    def _check_locked(self) -> bool:
        seconds, micros = self.redis.time()
        now = seconds + micros / 1_000_000
        known = {
            _text(k): json.loads(v) for k, v in self.redis.hgetall(self.keys.identities).items()
        }
        candidates: dict[str, set[str]] = {k: set(v) for k, v in known.items()}
        if self._full_scan_due(now):
            for identity, queue in self._scan_private_lists():
                candidates.setdefault(identity, set()).add(queue)
        suspects: dict[str, dict[str, Any]] = {
            _text(k): json.loads(v) for k, v in self.redis.hgetall(self.keys.suspects).items()
        }
        for identity, entry in suspects.items():  # found by an earlier SCAN, maybe
            candidates.setdefault(identity, set()).update(entry["queues"])
        candidates.pop(self.identity, None)
        alive = self._alive(candidates)
        pending = False
        for identity, queues in candidates.items():
            if alive[identity]:
                continue
            first_seen = suspects.pop(identity, {}).get("since")
            if first_seen is None:
                entry = {"since": now, "queues": sorted(queues)}
                self.redis.hset(self.keys.suspects, identity, json.dumps(entry))
                log.info("process %s missed its heartbeat; will look again", identity)
                pending = True
            elif now - first_seen >= 2 * self.config.heartbeat_interval:
                self.reap(identity, queues)
            else:
                pending = True
        if suspects:  # came back to life, or reaped by someone else
            self.redis.hdel(self.keys.suspects, *suspects)
        self.rescue.rescue_keys(now)
        return pending

    def _alive(self, identities: Iterable[str]) -> dict[str, bool]:
        names = list(identities)
        pipe = self.redis.pipeline(transaction=False)
        for identity in names:
            pipe.exists(self.keys.process(identity))
        return {name: bool(found) for name, found in zip(names, pipe.execute(), strict=True)}

    def _full_scan_due(self, now: float) -> bool:
        if (
            self._last_full_scan is None
            or now - self._last_full_scan >= self.config.orphan_full_scan_interval
        ):
            self._last_full_scan = now
            return True
        return False

    def _scan_private_lists(self) -> Iterable[tuple[str, str]]:
        """(identity, queue) of every private list, by SCAN (never KEYS)."""
        for key in self.redis.scan_iter(match=self.keys.private_pattern(), count=1000):
            parsed = self.keys.parse_private(key.decode())
            if parsed is not None:
                yield parsed

    # -- reaping -------------------------------------------------------------------------

    def reap(self, identity: str, queues: Iterable[str]) -> int:
        """Recover every job in the private lists of a dead process.

        Returns:
            How many jobs were pushed back (poison pills not counted).
        """
        recovered = stuck = 0
        started = started_payloads(self.redis, self.keys, identity)
        for queue in sorted(queues):
            private_key = self.keys.private(identity, queue)
            raws: list[bytes] = self.redis.lrange(private_key, 0, -1)  # type: ignore[assignment]
            # The right end is the oldest fetch: recover it last so it ends up running first.
            for raw in raws:
                unit = self.fetch.unit(queue, raw, private_key)
                try:
                    recovered += self._recover_one(unit, started)
                except ResponseError as exc:  # nothing changed (recover.lua checks first)
                    stuck += 1
                    log.error("a job of %s stays in its private list %s: %s", identity,
                              private_key, exc)
        if stuck:  # known still, so the next check tries them again
            log.warning("dead process %s: %d job(s) pushed back, %d left", identity, recovered,
                        stuck)
            return recovered
        pipe = self.redis.pipeline(transaction=True)
        pipe.hdel(self.keys.identities, identity)
        pipe.hdel(self.keys.suspects, identity)
        pipe.srem(self.keys.processes, identity)
        pipe.unlink(self.keys.process(identity), self.keys.work(identity),
                    self.keys.workers(identity), self.keys.started(identity))
        pipe.execute()
        log.warning("reaped dead process %s: %d job(s) pushed back", identity, recovered)
        return recovered

    def _recover_one(self, unit: UnitOfWork, started: frozenset[bytes]) -> int:
        """Push back one job of a dead process, counted as a possible poison pill only if
        the process had started it (in ``started``, its start marks: ``worker/started.py``)."""
        try:
            job: Payload | None = loads(unit.raw)
        except InvalidJob:
            job = None
        jid = job["jid"] if job is not None else "invalid"
        outcome = self.commands.recover(
            unit.private_key,
            unit.queue,
            unit.raw,
            unit.routing,
            jid,
            self.config.poison_max_recoveries,
            int(self.config.poison_window),
            counted=unit.raw in started,
        )
        if outcome == "requeued":
            log.info("recovered jid=%s to queue %s", jid, unit.queue)
            self._notify(job, False)
            return 1
        if outcome == "poison":
            self._bury_poison(unit, job)
        return 0

    def _bury_poison(self, unit: UnitOfWork, job: Payload | None) -> None:
        message = (
            f"recovered {self.config.poison_max_recoveries} times within "
            f"{self.config.poison_window / 3600:g} h from processes that died while running "
            "it; a poison pill (it may kill its worker), so it was not run again"
        )
        if job is not None:
            job["error_class"] = POISON_ERROR_CLASS
            job["error_message"] = message
            job.setdefault("failed_at", time.time())
        outcome = self.job_retry.kill(unit, job, RuntimeError(message))
        if outcome == "lost-ownership":
            return
        jid = job["jid"] if job else "invalid"
        where = "discarded" if outcome == "discarded" else "sent to the dead set"
        log.error("poison pill jid=%s %s", jid, where)
        self.redis.delete(self.keys.recoveries(jid))
        self._notify(job, True)

    def _notify(self, job: Payload | None, poison: bool) -> None:
        if self.config.on_recovery is None or job is None:
            return
        try:
            self.config.on_recovery(job, poison)
        except Exception as exc:
            log.error("on_recovery hook raised %r", exc)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _stamp(info: bytes | None) -> ProcessStamp | None:
    """The process stamp in a heartbeat's ``info`` JSON; None if missing or unreadable."""
    if info is None:
        return None
    try:
        parsed = json.loads(info)
    except ValueError:
        return None
    return ProcessStamp.from_info(parsed) if isinstance(parsed, dict) else None
