"""The Lua scripts an asyncio client calls, on a ``redis.asyncio`` client.

Only the client side runs from asyncio code (the worker's fetch, acknowledgements and
retries run in its threads), so only ``push.lua`` (and ``push_plain.lua``, its common
case) is here. Its KEYS and ARGV are built by
:meth:`rfetch.store.commands.Commands.push_call`, the one place that knows them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import redis.asyncio
from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from rfetch.store.commands import Commands
from rfetch.store.push_args import plain_call, push_written, queue_full
from rfetch.store.replies import Outgoing
from rfetch.store.scripts import read_script


class AsyncCommands:
    """``push.lua`` registered on an asyncio client.

    Args:
        redis: the asyncio client (one event loop's).
        commands: the sync layer whose argument builders are shared.
    """

    def __init__(self, redis: redis.asyncio.Redis, commands: Commands) -> None:
        self.redis = redis
        self.commands = commands
        self.keys = commands.keys
        self._push: AsyncScript = redis.register_script(read_script("push"))
        self._push_plain: AsyncScript = redis.register_script(read_script("push_plain"))

    async def push(
        self, jobs: Sequence[Outgoing], max_sizes: Mapping[str, int] | None = None
    ) -> list[bool]:
        """``push.lua`` for ``jobs``, all or none (see :meth:`Commands.push`): the KEYS and
        ARGV are :meth:`Commands.push_call`'s, the reply read by
        :func:`rfetch.store.push_args.push_written`; this only awaits the call.

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
        if plain is not None:  # as Commands.push: push_plain.lua
            await self._push_plain(keys=plain[0], args=plain[1])
            return [True] * len(jobs)
        keys, args = self.commands.push_call(jobs, max_sizes)
        try:
            refused = await self._push(keys=keys, args=args)
        except ResponseError as exc:
            raise queue_full(exc) from None
        return push_written(refused, len(jobs))
