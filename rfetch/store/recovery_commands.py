"""The recovery script calls (:class:`RecoveryCommands`): a dead process's jobs pushed back,
stuck ordering keys released, locks deleted by their holder. Part of
:class:`rfetch.store.commands.Commands`.
"""

from __future__ import annotations

from rfetch.jobs.payload import Routing
from rfetch.store.command_base import CommandBase, text
from rfetch.store.job_record import job_record


class RecoveryCommands(CommandBase):
    """``recover.lua``, ``rescue.lua`` and ``unlock.lua``, one typed method each."""

    def recover(
        self,
        private_key: str,
        queue: str,
        raw: bytes,
        routing: Routing | None,
        jid: str,
        poison_max: int,
        window: int,
        counted: bool = True,
    ) -> str:
        """``recover.lua``: push one job of a dead process back to the head of ``queue``,
        counting recoveries of ``jid`` (Sidekiq Pro 5.2's poison pills).

        Args:
            jid: names the recovery counter (``"invalid"`` for an unparseable payload).
            poison_max: recoveries that make a poison pill.
            window: the counting window in seconds.
            counted: False for a job the dead process held but had not started: it is
                pushed back without counting or checking its recoveries.

        Returns:
            ``"requeued"``, ``"gone"`` (no longer in the private list) or ``"poison"``
            (nothing changed).
        """
        keys = [private_key, self.keys.recoveries(jid), self.keys.prefix]
        args: list[bytes | str | int] = [
            raw,
            queue,
            poison_max if counted else 0,
            window,
            job_record(queue, routing) if routing is not None else "",
        ]
        return text(self.scripts.recover(keys=keys, args=args, client=self.redis))

    def rescue(self, queue: str, ordering_key: str, jid: str, grace: float) -> bool:
        """``rescue.lua``: release ``ordering_key`` of ``queue`` if ``jid`` still holds it
        and its lease expired more than ``grace`` seconds ago by Redis's clock; a stale
        lease (``jid`` no longer holds the key) is only removed. True if released."""
        holder = job_record(queue, Routing(jid=jid, ordering_key=ordering_key))
        return bool(
            self.scripts.rescue(keys=[self.keys.prefix], args=[holder, grace], client=self.redis)
        )

    def unlock(self, lock_key: str, token: bytes | str) -> bool:
        """``unlock.lua``: delete ``lock_key`` only if it still holds ``token``."""
        return bool(self.scripts.unlock(keys=[lock_key], args=[token], client=self.redis))
