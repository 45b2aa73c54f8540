"""The typed call of ``checkpoint.lua`` (a durable job's fenced checkpoint) and the plain
reads of the state it writes: the only code that knows the script's KEYS and ARGV order.
Built on a :class:`Commands` (its client, keys and the scripts
:mod:`rfetch.store.scripts` loads)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rfetch.store.commands import Commands

STATE_TTL = 30 * 24 * 3600
"""Seconds an iterable job's state and a job's step results are kept after their last
write (Sidekiq 7.3's ``it-<jid>`` TTL, 30 days)."""


@dataclass(frozen=True, slots=True)
class Written:
    """The reply of one fenced write.

    Attributes:
        owned: True if written; False if refused (the job is no longer in the writer's
            private list: another process owns it), nothing changed.
        cancelled: the hash's ``cancelled`` field (epoch seconds as text), or None.
    """

    owned: bool
    cancelled: str | None


class CheckpointCommands:
    """Fenced writes of ``it-<jid>`` and ``rfetch:steps:<jid>``, and their reads.

    Args:
        commands: the worker's commands (client, keys, loaded scripts).
    """

    def __init__(self, commands: Commands) -> None:
        self.commands = commands
        self.keys = commands.keys
        self.redis = commands.redis

    def write(
        self,
        private_key: str,
        raw: bytes,
        target: str,
        fields: Mapping[str, str],
        drop: Sequence[str] = (),
        ttl: int = STATE_TTL,
    ) -> Written:
        """``checkpoint.lua``: HSET ``fields`` into ``target`` (and HDEL ``drop``) and
        renew its TTL, only if ``raw`` is still in ``private_key``.

        Args:
            private_key: the private list the job was fetched into.
            raw: the payload exactly as fetched.
            target: the hash (:meth:`Keys.iteration` or :meth:`Keys.steps`).
            fields: field -> value to write.
            drop: fields to delete in the same write.
            ttl: seconds to keep ``target`` after this write.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        args: list[str | bytes | int] = [raw, "set", ttl, len(fields)]
        for name, value in fields.items():
            args += [name, value]
        args += list(drop)
        owned, cancelled = self.commands.scripts.checkpoint(
            keys=[private_key, target], args=args
        )
        text = cancelled.decode() if isinstance(cancelled, bytes) else cancelled
        return Written(owned == 1, text if isinstance(text, str) else None)

    def delete(self, private_key: str, raw: bytes, target: str) -> bool:
        """``checkpoint.lua``: delete ``target`` (the job completed) only if ``raw`` is
        still in ``private_key``; False if refused.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        owned, _ = self.commands.scripts.checkpoint(
            keys=[private_key, target], args=[raw, "del", 0, 0]
        )
        return bool(owned == 1)

    def read(self, target: str) -> dict[str, str]:
        """Every field of ``target`` (empty when absent), decoded as UTF-8 text."""
        raw = self.redis.hgetall(target)
        return {
            (k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in raw.items()
        }
