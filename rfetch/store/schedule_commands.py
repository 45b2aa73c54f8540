"""The push and scheduling script calls (:class:`ScheduleCommands`): due jobs of the
scheduled and retry sets moved to their queues, and ``push.lua``. Part of
:class:`rfetch.store.commands.Commands`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from redis.exceptions import ResponseError

from rfetch.store.command_base import CommandBase, text
from rfetch.store.push_args import plain_call, push_call, push_written, queue_full
from rfetch.store.replies import DueReply, Outgoing


class ScheduleCommands(CommandBase):
    """``enqueue_due.lua`` and ``push.lua``, one typed method each."""

    def enqueue_due(self, zset: str, limit: int) -> DueReply:
        """``enqueue_due.lua``: move up to ``limit`` jobs of ``zset`` (schedule or retry)
        due by Redis's clock to their queues; how many were moved, and why due jobs were
        left in the set (a key on their way holds another type)."""
        k = self.keys
        moved, left = self.scripts.enqueue_due(
            keys=[zset, k.queues, k.dead, k.prefix], args=[limit], client=self.redis
        )
        return DueReply(int(moved), [text(m) for m in left])

    def push(
        self, jobs: Sequence[Outgoing], max_sizes: Mapping[str, int] | None = None
    ) -> list[bool]:
        """``push.lua``: write ``jobs`` in push order, all or none: plain jobs to their
        queue or the scheduled set, jobs with an ordering key, a unique lock or a tenant
        through the gate. Plain jobs of one queue to run now, with no size to check (a
        plain ``perform_async``), go to ``push_plain.lua`` instead: the same writes and
        replies, for about three quarters of the Redis time and a quarter of the arguments.

        Args:
            max_sizes: queue name -> max_queue_size, checked for the jobs to run now.

        Returns:
            Per job, whether it was written (False: its unique lock was held).

        Raises:
            QueueFull: a queue of ``max_sizes`` would pass its size; nothing was written.
            redis.exceptions.ResponseError: a key on the jobs' way holds another type, or
                Redis refuses writes (out of memory, READONLY); nothing was written.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable (the
                call either wrote every job or none).
        """
        plain = plain_call(self.keys, jobs, max_sizes)
        if plain is not None:  # plain jobs of one queue: the same writes, fewer steps
            self.scripts.push_plain(keys=plain[0], args=plain[1], client=self.redis)
            return [True] * len(jobs)
        keys, args = self.push_call(jobs, max_sizes)
        try:
            reply = self.scripts.push(keys=keys, args=args, client=self.redis)
        except ResponseError as exc:
            raise queue_full(exc) from None
        return push_written(reply, len(jobs))

    def push_call(
        self, jobs: Sequence[Outgoing], max_sizes: Mapping[str, int] | None = None
    ) -> tuple[list[str], list[str | int]]:
        """``push.lua``'s KEYS and ARGV for ``jobs`` (see :func:`rfetch.store.push_args.
        push_call`), for this client and the asyncio one."""
        return push_call(self.keys, jobs, max_sizes)
