"""Waiting for replicas after acknowledgements (``Config.min_replicas_acks``).

An acknowledgement (the ``LREM`` of a finished job from its private list) that a replica
does not have yet can be undone by a failover: the promoted replica still holds the job in
the private list, recovery pushes it back and it runs again, a duplicate. Without this
option a failover can undo every acknowledgement within the replication lag (at 10,000
jobs/s, a 100 ms lag is 1,000 jobs). With it, each processor thread waits, after
acknowledging a job and before taking the next one, until ``min_replicas`` replicas have
the acknowledgement, so a failover undoes at most one acknowledgement per thread.

``WAIT`` only covers the writes of the connection that calls it, and acknowledgements go
through the worker's pool. So the waiting connection first sends a ``PUBLISH`` (a write
that Redis propagates to the replicas, with no key): it comes after every acknowledgement
that had been answered, so a ``WAIT`` for it covers them all, since a replica applies the
stream in order. Threads that finish together share one round (group commit): a thread
waits for the first round that started after its acknowledgement was answered.

None of Sidekiq, Celery or RQ waits for replicas after an acknowledgement.
"""

from __future__ import annotations

import logging
import threading

from redis.exceptions import RedisError

from rfetch.config import Config
from rfetch.push.replicas import Replicated, ReplicaWait
from rfetch.store.keys import Keys

log = logging.getLogger("rfetch.worker")


class AckReplicas:
    """Call :meth:`after_ack` after an acknowledgement to wait for the replicas.

    Args:
        config: ``min_replicas``, ``min_replicas_timeout`` (seconds), the Redis URL and the
            namespace (the channel of the marking ``PUBLISH``).

    Raises:
        ConfigError, RedisUnavailable: as :func:`rfetch.store.connection.connect`.
    """

    def __init__(self, config: Config) -> None:
        self.wait = ReplicaWait(config)
        self.channel = Keys(config.namespace).ack_mark_channel
        self._cond = threading.Condition()
        self._started = 0
        self._finished = 0
        self._running = False
        self._last_ok = False
        self.late = 0
        """Rounds in which the replicas did not confirm in time (or Redis failed)."""

    def after_ack(self) -> bool:
        """Block until a round that started after this call has waited for the replicas.

        Returns:
            True when ``min_replicas`` replicas confirmed within ``min_replicas_timeout``;
            False otherwise (logged): the acknowledgement is on the master only, and a
            failover before the replica catches up runs the job again. Never raises: the
            job has run and is acknowledged either way.
        """
        with self._cond:
            wanted = self._started + 1
            while self._finished < wanted:
                if self._running:
                    self._cond.wait()
                    continue
                self._running = True
                self._started += 1
                number = self._started
                confirmed = False
                self._cond.release()
                try:
                    confirmed = self._round()
                finally:
                    self._cond.acquire()
                    self._running = False
                    self._finished = number
                    self._last_ok = confirmed
                    self._cond.notify_all()
            return self._last_ok

    def _round(self) -> bool:
        try:
            self.wait.redis.publish(self.channel, b"")
            # The connection that sent the mark (a reconnect before the WAIT voids it).
            outcome = self.wait.check(self.wait.generation)
        except (RedisError, OSError) as exc:
            reason = f"Redis failed: {exc}"
        except Exception as exc:  # "never raises": the job is done and acknowledged
            log.exception("waiting for the replicas failed")
            reason = f"{type(exc).__name__}: {exc}"
        else:
            if outcome is Replicated.YES:
                return True
            reason = f"{outcome.value} after {self.wait.timeout_ms} ms"
        self.late += 1
        log.warning(
            "acknowledgements not confirmed by %d replica(s) (%s); a failover now would "
            "run those jobs again", self.wait.replicas, reason,
        )
        return False
