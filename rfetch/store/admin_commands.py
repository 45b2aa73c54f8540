"""The admin API's script calls (:class:`AdminCommands`): bounded searches of a list or
sorted set, and moves out of a sorted set. Part of :class:`rfetch.store.commands.Commands`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Literal

from redis.client import Pipeline

from rfetch.jobs.payload import Routing
from rfetch.store.command_base import CommandBase, queue_script
from rfetch.store.job_record import job_record
from rfetch.store.replies import FindReply


class AdminCommands(CommandBase):
    """``api_find.lua`` and ``api_move.lua``, one typed method each."""

    def api_find(
        self, key: str, kind: Literal["list", "zset"], start: int, count: int, jids: Iterable[str]
    ) -> FindReply:
        """``api_find.lua``: entries of one window of a list (positions from the right end,
        0 runs next) or sorted set (ranks) whose top-level-looking jid is one of ``jids``
        (the caller checks the real jid)."""
        args = [kind, start, count, *jids]
        reply = self.scripts.api_find(keys=[key], args=args, client=self.redis)
        return FindReply(
            int(reply[0]),
            [
                (
                    int(reply[i]),
                    reply[i + 1],
                    float(reply[i + 2]) if reply[i + 2] not in (b"", "") else None,
                )
                for i in range(1, len(reply), 3)
            ],
        )

    def api_move(
        self,
        pipe: Pipeline,
        source: str,
        mode: Literal["queue", "dead", "delete"],
        entry: bytes,
        payload: bytes | str,
        routing: Routing | None,
        queue: str = "",
        score: float = 0.0,
        trim_before: float | None = None,
        cap: int | None = None,
        failure: str = "",
    ) -> None:
        """``api_move.lua`` queued on ``pipe``: ZREM ``entry`` from ``source`` and, if it
        was there, write ``payload`` to its queue (mode ``"queue"``, through the gate for a
        keyed or tenant job) or the dead set (mode ``"dead"``, trimmed as ``settle``), or
        nothing (``"delete"``); a keyed or unique job's key and lock are released by
        ``"dead"`` and ``"delete"``. The reply is 1 if moved, 0 if the entry was gone.

        Args:
            routing: routing fields of ``payload``; None for a plain or invalid entry.
            queue: mode "queue": the destination queue name.
            score: mode "dead": time of death, float epoch seconds.
            failure: mode "dead", a batched job: its failure as JSON (the kill is its
                death in its batch, counted in the same call).
        """
        k = self.keys
        destination = k.queue(queue) if mode == "queue" else k.dead
        keys = [source, destination, k.queues]
        args: list[bytes | str] = [
            mode,
            entry,
            payload,
            queue if mode == "queue" else repr(score),
            "" if trim_before is None else repr(trim_before),
            "" if cap is None else str(cap),
        ]
        keys.append(k.prefix)
        args += [_move_record(routing), failure if mode == "dead" else ""]
        queue_script(self.scripts.api_move, pipe, keys=keys, args=args)


def _move_record(routing: Routing | None) -> str:
    """``api_move.lua``'s record of a sorted set's entry: "" for a plain or invalid one; the
    gate acts on an ordering key, a tenant or a cap only with the payload's queue."""
    if routing is None or not (routing.gated or routing.batched):
        return ""
    if not routing.queue:
        routing = replace(routing, ordering_key=None, tenant=None, concurrency_key=None)
    return job_record(routing.queue, routing)
