"""Stuck-key rescue: ordering keys whose running holder vanished are released.

The heartbeat of a process writes a lease for each keyed job it runs
(``rfetch:key-leases:<q>``); orphan recovery (:mod:`rfetch.worker.orphan_recovery`) calls
:meth:`KeyRescue.rescue_keys` after each of its checks, under its lock, to release the keys
whose lease expired and whose holder is in no private list.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from rfetch.config import Config
from rfetch.store.commands import Commands

log = logging.getLogger("rfetch.recovery")


class KeyRescue:
    """Releases stuck ordering keys (``rescue.lua``).

    Args:
        config: ``heartbeat_ttl`` (seconds): how long a lease must have expired.
        commands: the Lua scripts, and the client and key names they use.
    """

    def __init__(self, config: Config, commands: Commands) -> None:
        self.config = config
        self.commands = commands
        self.redis = commands.redis
        self.keys = commands.keys

    def rescue_keys(self, now: float) -> int:
        """Release ordering keys whose running holder vanished.

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
                if self.commands.rescue(queue, key, jid, self.config.heartbeat_ttl):
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



def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
