"""The Redis calls of the leader lease and the ticker, on the store's typed script calls
(:class:`rfetch.store.commands.Commands`) and a blocking connection for the followers."""

from __future__ import annotations

from collections.abc import Sequence

from redis import Redis

from rfetch.periodic.ticker import BuiltJob, SyncEntry
from rfetch.store.commands import Commands
from rfetch.store.replies import LeaderClaim


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class PeriodicStore:
    """Implements :class:`rfetch.periodic.lease.LeaseCommands` and
    :class:`rfetch.periodic.ticker.TickCommands`.

    Args:
        commands: the typed script calls.
        blocking: a client whose socket timeout is longer than ``leader_ttl``, for the
            followers' blocking wait on the wake list.
    """

    def __init__(self, commands: Commands, blocking: Redis) -> None:
        self.commands = commands
        self.blocking = blocking

    def claim(self, token: str, identity: str, ttl_ms: int) -> LeaderClaim:
        """Take or renew the lease (``leader_claim.lua``)."""
        return self.commands.leader_claim(token, identity, ttl_ms)

    def resign(self, token: str, wake_ttl_ms: int) -> bool:
        """Give the lease up (``leader_resign.lua``); True when ``token`` held it."""
        return self.commands.leader_resign(token, wake_ttl_ms)

    def wait_for_wake(self, timeout: float) -> bool:
        """BLPOP the wake list for up to ``timeout`` seconds; True when woken."""
        key = self.commands.keys.leader_wake
        return self.blocking.blpop([key], timeout=timeout) is not None

    def sync(self, token: str, entries: Sequence[SyncEntry]) -> list[int] | None:
        """Write ``entries``, remove the stored schedules they lack (``periodic_sync.lua``)
        and return their cursors; None when ``token`` does not lead."""
        names = {e.name for e in entries}
        stored = (_text(n) for n in self.commands.redis.hkeys(self.commands.keys.periodic))
        removed = sorted(n for n in stored if n not in names)
        rows = [(e.name, e.definition, e.fingerprint) for e in entries]
        return self.commands.periodic_sync(token, rows, removed)

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
        """Push one tick's job at most once (``periodic_push.lua``)."""
        return self.commands.periodic_push(
            token, name, tick, window, marker_ttl, job.queue, job.jid, job.payload, late
        )

    def skip_ticks(self, token: str, name: str, through: int, count: int) -> str:
        """Count skipped ticks and move the cursor past them (``periodic_skip.lua``)."""
        return self.commands.periodic_skip(token, name, through, count)
