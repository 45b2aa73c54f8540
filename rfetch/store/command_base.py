"""What every domain of the typed script calls (:mod:`rfetch.store.commands`) shares: the
client and key names the scripts run with, the key block of a queue's gate, and how a
script is queued on a pipeline.

A domain class (``JobCommands``, ``AdminCommands``...) derives from :class:`CommandBase`
and adds one typed method per script; :class:`rfetch.store.commands.Commands` combines
them all on one :class:`rfetch.store.scripts.Scripts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from redis import Redis
from redis.client import Pipeline
from redis.cluster import ClusterPipeline
from redis.typing import EncodableT

from rfetch.store.functions import LuaScript
from rfetch.store.keys import Keys
from rfetch.store.scripts import Scripts

Client = Redis | Pipeline
"""Where a script runs: the client itself, or a pipeline (queued, answered at execute)."""

Outcome = Literal["retry", "skip", "dead", "poison"]
"""What settling a keyed job does to its key: keep it blocked, release it, or release it
and drop the unique lock ("poison": as "dead", for a poison pill: lua/lib/outcome.lua's
poison)."""


def queue_script(
    script: LuaScript, pipe: Pipeline, *, keys: Sequence[str], args: Sequence[EncodableT]
) -> None:
    """Queue ``script`` on ``pipe`` (a MULTI/EXEC pipeline).

    redis-py's cluster pipeline refuses EVALSHA (it cannot load a missing script inside a
    transaction), and a promoted replica may lack a script the old master had, so on a
    Redis Cluster the script travels as EVAL with its text; all its keys are in one slot.
    """
    if isinstance(pipe, ClusterPipeline):
        pipe.execute_command("EVAL", script.script, len(keys), *keys, *args)
    else:
        script(keys=keys, args=args, client=pipe)


def text(value: bytes | str) -> str:
    """``value`` as a str (a reply is bytes unless the client decodes responses)."""
    return value.decode() if isinstance(value, bytes) else value


class CommandBase:
    """The scripts, registered on one Redis client, and the namespace's key names.

    Args:
        redis: the client the scripts run on (a method's ``client`` may name a pipeline).
        keys: key names of the namespace.
    """

    def __init__(self, redis: Redis, keys: Keys) -> None:
        self.redis = redis
        self.keys = keys
        self.scripts = Scripts.load(redis)

