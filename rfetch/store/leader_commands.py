"""The leader election and periodic jobs' script calls (:class:`LeaderCommands`): the leader
lease, and the leader's schedules and ticks. Part of :class:`rfetch.store.commands.Commands`.
"""

from __future__ import annotations

from collections.abc import Sequence

from rfetch.store.command_base import CommandBase, text
from rfetch.store.replies import LeaderClaim


class LeaderCommands(CommandBase):
    """``leader_claim.lua``, ``leader_resign.lua``, ``periodic_sync.lua``,
    ``periodic_push.lua`` and ``periodic_skip.lua``, one typed method each."""

    def leader_claim(self, token: str, identity: str, ttl_ms: int) -> LeaderClaim:
        """``leader_claim.lua``: take the leader lease if nobody holds it, or renew it if
        ``token`` does, for ``ttl_ms`` milliseconds of Redis's clock."""
        k = self.keys
        status, holder, remaining, seconds, micros = self.scripts.leader_claim(
            keys=[k.leader, k.leader_changes, k.leader_wake], args=[token, ttl_ms, identity],
            client=self.redis,
        )
        return LeaderClaim(int(status), text(holder), max(0, int(remaining)) / 1000,
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
        return None if cursors is None else [int(float(text(c))) for c in cursors]

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
        return text(self.scripts.periodic_push(keys=keys, args=args, client=self.redis))

    def periodic_skip(self, token: str, name: str, through: int, count: int) -> str:
        """``periodic_skip.lua``: count ``count`` ticks of ``name`` as skipped and move its
        cursor to ``through`` (epoch seconds); ``skipped``, ``done`` or ``lost``."""
        k = self.keys
        answer = self.scripts.periodic_skip(
            keys=[k.leader, k.periodic_state(name)], args=[token, through, count],
            client=self.redis,
        )
        return text(answer)
