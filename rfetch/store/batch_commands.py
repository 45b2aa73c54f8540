"""The typed call of ``batch_push.lua``: the only code that knows its KEYS and ARGV order.

The batch side of the other scripts (``fetch.lua``, ``finish.lua``, ``settle.lua``) is
passed by :class:`rfetch.store.commands.Commands`, only for batched jobs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from redis.exceptions import ResponseError

from rfetch.store.commands import Commands
from rfetch.store.push_args import push_written, queue_full
from rfetch.store.replies import Outgoing


class BatchCommands:
    """``batch_push.lua`` on the client and keys of ``commands``."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands
        self.keys = commands.keys

    def push(
        self,
        bid: str,
        mode: Literal["new", "add"],
        ttl: int,
        parent: str | None,
        fields: Mapping[str, str],
        jobs: Sequence[Outgoing],
        jids: Sequence[str],
        max_sizes: Mapping[str, int] | None = None,
    ) -> list[bool]:
        """``batch_push.lua``: write ``jobs`` (as ``push.lua``) and register them in batch
        ``bid``, all or none, in one call.

        Args:
            bid: the batch id.
            mode: ``"new"`` creates the batch; ``"add"`` adds to an existing one that has
                not succeeded.
            ttl: seconds the batch's keys live until it succeeds (renewed by each call).
            parent: a new batch's parent bid, or None.
            fields: a new batch's hash fields (description, success_ttl, callbacks).
            jobs: the jobs, in push order; ``jids``: their jids, in the same order.
            max_sizes: queue name -> max_queue_size, checked as ``push.lua`` does.

        Returns:
            Per job, whether it was written (False: its unique lock was held; it is not in
            the batch).

        Raises:
            QueueFull: a queue of ``max_sizes`` would pass its size; nothing was written.
            redis.exceptions.ResponseError: the batch exists (``new``), does not exist or
                has succeeded (``add``), the parent does not exist or has succeeded, or a
                key holds another type: nothing was written.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable (the
                call wrote everything or nothing).
        """
        push_keys, push_args = self.commands.push_call(jobs, max_sizes)
        k = self.keys
        keys = [k.batch(bid), k.batches, k.prefix, *push_keys]
        args: list[str | int] = [bid, mode, ttl, parent or "", len(fields)]
        for name, value in fields.items():
            args += [name, value]
        args += [len(jids), *jids, *push_args]
        try:
            refused = self.commands.scripts.batch_push(
                keys=keys, args=args, client=self.commands.redis
            )
        except ResponseError as exc:
            raise queue_full(exc) from None
        return push_written(refused, len(jobs))
