"""The typed call of ``push_once.lua`` (the outbox relay's push, idempotent by jid): the
only code that knows its KEYS and ARGV order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from redis.exceptions import ResponseError

from rfetch.store.commands import Commands
from rfetch.store.push_args import queue_full
from rfetch.store.replies import Outgoing


@dataclass(frozen=True)
class PushOnce:
    """What one ``push_once.lua`` call did.

    Attributes:
        seen: positions (0-based, in push order) of jobs whose marker was found: the call
            wrote nothing at all; push the others again without them.
        refused: when nothing was seen, positions (0-based) of the jobs not written because
            their unique lock was held; every other job was written.
    """

    seen: tuple[int, ...]
    refused: tuple[int, ...]


class OutboxCommands:
    """``push_once.lua`` on the client and keys of ``commands``."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands
        self.keys = commands.keys

    def push_once(self, jobs: Sequence[Outgoing], jids: Sequence[str], ttl_ms: int) -> PushOnce:
        """Push ``jobs`` as ``push.lua`` does and set each one's marker (key
        ``rfetch:outbox:pushed:<jid>``, for ``ttl_ms`` milliseconds), all in one atomic call;
        when any job's marker already exists, write nothing and say which.

        Args:
            jobs: the jobs, in push order.
            jids: their jids, in the same order (one marker each).
            ttl_ms: the markers' time to live, whole milliseconds >= 1.

        Raises:
            ValueError: ``jids`` and ``jobs`` differ in length, or ``ttl_ms`` < 1.
            redis.exceptions.ResponseError: as ``push.lua`` (a key of another type, out of
                memory, READONLY): nothing was written.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable (the call
                either wrote every job and marker or none).
        """
        if len(jids) != len(jobs):
            raise ValueError(f"{len(jobs)} jobs but {len(jids)} jids")
        if ttl_ms < 1:
            raise ValueError(f"the markers' TTL must be >= 1 ms, not {ttl_ms}")
        keys, args = self.commands.push_call(jobs)
        markers = [self.keys.outbox_marker(jid) for jid in jids]
        try:
            reply = self.commands.scripts.push_once(
                keys=[*markers, *keys], args=[len(markers), ttl_ms, *args],
                client=self.commands.redis,
            )
        except ResponseError as exc:
            raise queue_full(exc) from None
        kind = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        positions = tuple(int(p) - 1 for p in reply[1:])
        if kind == "seen":
            return PushOnce(positions, ())
        return PushOnce((), positions)

    def forget(self, jids: Sequence[str]) -> None:
        """Delete the markers of ``jids`` (their outbox rows are deleted and committed, so
        no relay can push them again); a marker left by a relay that died first expires
        with its TTL."""
        if jids:
            self.commands.redis.unlink(*(self.keys.outbox_marker(jid) for jid in jids))
