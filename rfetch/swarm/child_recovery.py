"""The parent's recovery of a dead child's private lists, at once.

A swarm's parent knows when a child died without its own shutdown (KILL, the OOM killer,
a crash), and its identity: it pushes the child's jobs back to their queues at once with
orphan recovery's own step (:meth:`rfetch.worker.orphan_recovery.OrphanRecovery.reap`:
``recover.lua`` per job, poison pills to the dead set), instead of waiting for the child's
heartbeat to expire and the orphan check to see it. It opens a Redis connection for that
and closes it before the next fork, so no child inherits it.
"""

from __future__ import annotations

import os
import socket

from rfetch.config import Config
from rfetch.store.connection import connect
from rfetch.store.keys import Keys
from rfetch.worker.context import WorkerContext
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.orphan_recovery import OrphanRecovery
from rfetch.worker.retry import JobRetry


class ParentRecovery:
    """Recovers the private lists of one dead child per call.

    Args:
        config: the swarm's settings (Redis, namespace, queues, poison-pill limits).
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self.keys = Keys(config.namespace)
        self.identity = f"{socket.gethostname()}:{os.getpid()}:swarm"

    def __call__(self, identity: str) -> int:
        """Push back every job left in ``identity``'s private lists; how many.

        Raises:
            redis.exceptions.RedisError, OSError: Redis could not be reached (the jobs
                stay where they are; orphan recovery takes them later).
        """
        redis = connect(self.config, max_connections=2)
        try:
            context = WorkerContext.build(self.config, redis, self.identity)
            recovery = OrphanRecovery(
                context,
                ReliableFetch(context),
                JobRetry(self.config, self.keys),
            )
            return recovery.reap(identity, [q.name for q in self.config.queues])
        finally:
            redis.close()
