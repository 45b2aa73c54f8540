"""The Lua scripts an asyncio client calls, on a ``redis.asyncio`` client.

Only the client side runs from asyncio code (the worker's fetch, acknowledgements and
retries run in its threads), so only ``push.lua`` is here. Its KEYS and ARGV are built by
:meth:`rfetch.store.commands.Commands.push_call`, the one place that knows them.
"""

from __future__ import annotations

import redis.asyncio
from redis.commands.core import AsyncScript

from rfetch.payload import Routing
from rfetch.store.commands import Commands
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

    async def push(
        self,
        pipe: redis.asyncio.client.Pipeline,
        queue: str,
        text: str,
        at: float | None,
        routing: Routing,
        window_ms: int,
    ) -> None:
        """``push.lua`` queued on ``pipe`` (see :meth:`Commands.push`)."""
        keys, args = self.commands.push_call(queue, text, at, routing, window_ms)
        await self._push(keys=keys, args=args, client=pipe)
