"""The periodic jobs' Redis calls: one typed function per Lua script, the only code that
knows their KEYS and ARGV order. Every key a script touches is passed in KEYS."""

from __future__ import annotations

from collections.abc import Sequence

from redis import Redis
from redis.commands.core import Script

from rfetch.keys import Keys
from rfetch.periodic.lease import Claim
from rfetch.periodic.ticker import BuiltJob, SyncEntry
from rfetch.scripts import read_script


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PeriodicCommands:
    """The leader election and periodic scripts on one Redis client.

    Args:
        redis: the client for the scripts.
        blocking: a client whose socket timeout is longer than ``leader_ttl``, for the
            followers' blocking wait on the wake list.
        keys: the key names.
    """

    def __init__(self, redis: Redis, blocking: Redis, keys: Keys) -> None:
        self.redis = redis
        self.blocking = blocking
        self.keys = keys
        self._scripts: dict[str, Script] = {
            name: redis.register_script(read_script(name))
            for name in (
                "leader_claim", "leader_resign", "periodic_sync", "periodic_push", "periodic_skip",
            )
        }

    def claim(self, token: str, identity: str, ttl_ms: int) -> Claim:
        """``leader_claim.lua``: take or renew the lease."""
        k = self.keys
        status, holder, remaining, seconds, micros = self._scripts["leader_claim"](
            keys=[k.leader, k.leader_changes, k.leader_wake],
            args=[token, ttl_ms, identity],
            client=self.redis,
        )
        return Claim(
            status=int(status),
            holder=_text(holder),
            remaining=max(0, int(remaining)) / 1000.0,
            redis_time=int(seconds) + int(micros) / 1_000_000,
        )

    def resign(self, token: str, wake_ttl_ms: int) -> bool:
        """``leader_resign.lua``: give the lease up; True when this token held it."""
        return bool(
            self._scripts["leader_resign"](
                keys=[self.keys.leader, self.keys.leader_wake],
                args=[token, wake_ttl_ms],
                client=self.redis,
            )
        )

    def wait_for_wake(self, timeout: float) -> bool:
        """BLPOP the wake list for up to ``timeout`` seconds; True when woken."""
        return self.blocking.blpop([self.keys.leader_wake], timeout=timeout) is not None

    def sync(self, token: str, entries: Sequence[SyncEntry]) -> list[int] | None:
        """``periodic_sync.lua``: write ``entries``, remove the stored schedules they lack,
        and return their cursors (None when the token does not lead)."""
        k = self.keys
        names = {e.name for e in entries}
        stored = [_text(n) for n in self.redis.hkeys(k.periodic)]
        removed = sorted(n for n in stored if n not in names)
        args: list[str | int] = [token, len(entries)]
        for entry in entries:
            args += [entry.name, entry.definition, entry.fingerprint]
        args += removed
        keys = [k.leader, k.periodic]
        keys += [k.periodic_state(e.name) for e in entries]
        keys += [k.periodic_state(n) for n in removed]
        cursors = self._scripts["periodic_sync"](keys=keys, args=args, client=self.redis)
        if cursors is None:
            return None
        return [int(float(_text(c))) for c in cursors]

    def push_tick(
        self,
        token: str,
        name: str,
        tick: int,
        window: float,
        marker_ttl: int,
        job: BuiltJob,
        late: bool,
    ) -> str:
        """``periodic_push.lua``: push one tick's job at most once."""
        k = self.keys
        answer = self._scripts["periodic_push"](
            keys=[
                k.leader, k.periodic_state(name), k.periodic_tick(name, tick),
                k.queue(job.queue), k.queues,
            ],
            args=[token, tick, repr(float(window)), marker_ttl, job.queue, job.jid, job.payload,
                  "1" if late else "0"],
            client=self.redis,
        )
        return _text(answer)

    def skip_ticks(self, token: str, name: str, through: int, count: int) -> str:
        """``periodic_skip.lua``: count skipped ticks and move the cursor past them."""
        answer = self._scripts["periodic_skip"](
            keys=[self.keys.leader, self.keys.periodic_state(name)],
            args=[token, through, count],
            client=self.redis,
        )
        return _text(answer)
