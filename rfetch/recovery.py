"""Orphan recovery: jobs left in the private lists of dead processes go back to their queues.

Sidekiq Pro recovers orphans only when a process starts, so users wait hours (Sidekiq
#5540, #6951). Here every worker checks periodically (``orphan_check_interval``, jittered),
and one process at a time does the work, under a Redis lock.

A process is dead when its heartbeat hash has expired (``heartbeat_ttl``). It is reaped
only at a second look, at least two heartbeat intervals after the first by Redis's clock,
and only if its heartbeat is still missing then: a Redis freeze expires every heartbeat at
once, but live workers beat again before the second look (Sidekiq #4611 recovered jobs a
live process was running).

Each job is moved by ``recover.lua`` atomically. A job recovered ``poison_max_recoveries``
times within ``poison_window`` is a poison pill (it likely kills its worker): it goes to the
dead set through ``settle.lua`` instead (Sidekiq Pro 5.2).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Iterable
from typing import Any

from redis import Redis

from rfetch.config import Config
from rfetch.errors import InvalidJob
from rfetch.fetch import REDIS_DOWN, UnitOfWork
from rfetch.keys import Keys
from rfetch.payload import dumps, loads
from rfetch.reporting import report
from rfetch.scripts import Scripts

log = logging.getLogger("rfetch.recovery")

POISON_ERROR_CLASS = "rfetch.PoisonPill"


class OrphanRecovery:
    """Finds dead processes and recovers their jobs.

    Args:
        config: intervals, poison-pill limits, ``on_recovery``, death handlers.
        redis: the client.
        scripts: ``recover``, ``settle``, ``unlock``.
        identity: this process (never reaped by itself).
        rng: random source for the jitter.
    """

    def __init__(
        self,
        config: Config,
        redis: Redis,
        scripts: Scripts,
        identity: str,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.redis = redis
        self.scripts = scripts
        self.identity = identity
        self.keys = Keys(config.namespace)
        self.rng = rng or random.Random()
        self._last_full_scan: float | None = None

    # -- schedule ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Check at start-up, then every jittered interval, until ``stop`` is set."""
        wait = min(2.0, self.config.orphan_check_interval)
        while not stop.wait(wait):
            wait = self.next_wait(self.check_safely())

    def next_wait(self, suspects_pending: bool) -> float:
        """Seconds to the next check: two heartbeats while a suspect awaits its second
        look, else the interval randomised to [0.5x, 1.5x]."""
        if suspects_pending:
            return 2 * self.config.heartbeat_interval + 0.5
        base = self.config.orphan_check_interval
        return base * self.rng.random() + base / 2

    def check_safely(self) -> bool:
        """:meth:`check`, logging errors instead of raising; True if suspects remain."""
        try:
            return self.check()
        except REDIS_DOWN as exc:
            log.warning("orphan check skipped, Redis unreachable: %s", exc)
        except Exception as exc:
            log.exception("orphan check failed")
            report(self.config.error_handlers, exc, {"context": "recovery"})
        return False

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
            self.scripts.unlock(
                keys=[self.keys.recovery_lock], args=[self.identity], client=self.redis
            )

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
        self.scripts.unlock(keys=[self.keys.recovery_lock], args=[holder], client=self.redis)
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
        self.rescue_keys(now)
        return pending

    # -- stuck ordering keys (issue #5) ---------------------------------------------------

    def rescue_keys(self, now: float) -> int:
        """Release ordering keys whose running holder vanished (the seed design's
        re-scheduler for keys whose runner is gone).

        The heartbeat of a process writes a lease (``rfetch:key-leases:<q>``, member
        ``<jid>:<key>``) for each keyed job it runs; every way out of a private list (ack,
        retry/dead set, push-back, orphan recovery) removes it. A lease expired for more
        than ``heartbeat_ttl`` seconds, after this check's orphan recovery, whose jid still
        holds the key but is in no private list of the queue, means the holder is gone
        (e.g. a tool outside rfetch deleted it): ``rescue.lua`` then releases the key, if
        the same jid still holds it and the lease is still expired, and its next job goes
        out. A lease whose jid no longer holds its key is stale and only removed.

        Args:
            now: Redis time, float epoch seconds.

        Returns:
            The number of keys released.
        """
        queues = sorted(_text(q) for q in self.redis.smembers(self.keys.queues))
        if not queues:
            return 0
        cutoff = now - self.config.heartbeat_ttl
        pipe = self.redis.pipeline(transaction=False)
        for queue in queues:
            pipe.zrangebyscore(self.keys.key_leases(queue), "-inf", cutoff, start=0, num=100)
        expired = {
            queue: [_text(m).partition(":")[::2] for m in members]
            for queue, members in zip(queues, pipe.execute(), strict=True)
            if members
        }
        if not expired:
            return 0
        identities = {_text(i) for i in self.redis.hkeys(self.keys.identities)}
        identities |= {_text(i) for i in self.redis.smembers(self.keys.processes)}
        released = 0
        for queue, leases in expired.items():
            holders = self.redis.hmget(self.keys.key_holders(queue), [k for _, k in leases])
            private: list[bytes] | None = None
            for (jid, key), holder in zip(leases, holders, strict=True):
                if holder is not None and _text(holder) == jid:
                    if private is None:  # read only when a lease's jid still holds its key
                        private = self._private_payloads(identities, queue)
                    marker = b'"jid":"' + jid.encode() + b'"'
                    if any(marker in raw for raw in private):
                        continue  # still held by a process (a stalled heartbeat): not stuck
                if self.scripts.rescue(
                    keys=[],
                    args=[self.keys.prefix, queue, key, jid, self.config.heartbeat_ttl],
                    client=self.redis,
                ):
                    released += 1
                    log.warning(
                        "released ordering key %r of queue %s: its holder jid=%s vanished",
                        key,
                        queue,
                        jid,
                    )
        return released

    def _private_payloads(self, identities: Iterable[str], queue: str) -> list[bytes]:
        """Every payload in the private lists of ``identities`` for ``queue``."""
        out: list[bytes] = []
        for identity in sorted(identities):
            raws: list[bytes] = self.redis.lrange(  # type: ignore[assignment]
                self.keys.private(identity, queue), 0, -1
            )
            out.extend(raws)
        return out

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
        recovered = 0
        for queue in sorted(queues):
            private_key = self.keys.private(identity, queue)
            raws: list[bytes] = self.redis.lrange(private_key, 0, -1)  # type: ignore[assignment]
            # The right end is the oldest fetch: recover it last so it ends up running first.
            for raw in raws:
                recovered += self._recover_one(UnitOfWork(queue, raw, private_key))
        pipe = self.redis.pipeline(transaction=True)
        pipe.hdel(self.keys.identities, identity)
        pipe.hdel(self.keys.suspects, identity)
        pipe.srem(self.keys.processes, identity)
        pipe.unlink(self.keys.work(identity))
        pipe.execute()
        log.warning("reaped dead process %s: %d job(s) pushed back", identity, recovered)
        return recovered

    def _recover_one(self, unit: UnitOfWork) -> int:
        try:
            job: dict[str, Any] | None = loads(unit.raw)
        except InvalidJob:
            job = None
        jid = job["jid"] if job is not None else "invalid"
        result = self.scripts.recover(
            keys=[
                unit.private_key,
                self.keys.queue(unit.queue),
                self.keys.queues,
                self.keys.recoveries(jid),
            ],
            args=[
                unit.raw,
                unit.queue,
                self.config.poison_max_recoveries,
                int(self.config.poison_window),
                self.keys.prefix,
            ],
            client=self.redis,
        )
        outcome = result.decode() if isinstance(result, bytes) else str(result)
        if outcome == "requeued":
            log.info("recovered jid=%s to queue %s", jid, unit.queue)
            self._notify(job, False)
            return 1
        if outcome == "poison":
            self._bury_poison(unit, job)
        return 0

    def _bury_poison(self, unit: UnitOfWork, job: dict[str, Any] | None) -> None:
        now = time.time()
        message = (
            f"recovered {self.config.poison_max_recoveries} times within "
            f"{self.config.poison_window / 3600:g} h from processes that died while running "
            "it; a poison pill (it may kill its worker), so it was not run again"
        )
        if job is None:
            payload: bytes | str = unit.raw
            discard = False
        else:
            job["error_class"] = POISON_ERROR_CLASS
            job["error_message"] = message
            job.setdefault("failed_at", now)
            payload = dumps(job, 2**62)
            discard = job.get("dead") is False
        gate = gate_of(unit, job)
        if discard:
            owned = bool(
                self.scripts.finish(
                    keys=[unit.private_key],
                    args=[unit.raw, *gate.gate_args(self.keys.prefix), gate.unique or ""],
                    client=self.redis,
                )
            )
        else:
            owned = bool(
                self.scripts.settle(
                    keys=[unit.private_key, self.keys.dead],
                    args=[
                        unit.raw,
                        repr(now),
                        payload,
                        repr(now - self.config.dead_timeout),
                        str(self.config.dead_max_jobs),
                        *gate.gate_args(self.keys.prefix),
                        "dead",
                        gate.unique or "",
                    ],
                    client=self.redis,
                )
            )
        if not owned:
            return
        jid = job["jid"] if job else "invalid"
        log.error("poison pill jid=%s %s", jid, "discarded" if discard else "sent to the dead set")
        self.redis.delete(self.keys.recoveries(jid))
        if job is not None:
            for handler in self.config.death_handlers:
                try:
                    handler(job, RuntimeError(message))
                except Exception as exc:
                    log.error("death handler %r raised %r", handler, exc)
        self._notify(job, True)

    def _notify(self, job: dict[str, Any] | None, poison: bool) -> None:
        if self.config.on_recovery is None or job is None:
            return
        try:
            self.config.on_recovery(job, poison)
        except Exception as exc:
            log.error("on_recovery hook raised %r", exc)


def gate_of(unit: UnitOfWork, job: dict[str, Any] | None) -> UnitOfWork:
    """``unit`` with the ordering key, unique lock and jid of its parsed payload noted
    (issue #5), for the scripts that release them."""
    if job is not None:
        key, unique = job.get("ordering_key"), job.get("unique_key")
        unit.jid = str(job.get("jid", ""))
        unit.ordering_key = key if isinstance(key, str) and key else None
        unit.unique = unique if isinstance(unique, str) and unique else None
    return unit


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
