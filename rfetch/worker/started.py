"""Start marks: which of the jobs a process held it had started (poison-pill counting).

Orphan recovery counts a recovery against a job's poison-pill limit
(``poison_max_recoveries``) only when the dead process had started the job: a job it had
fetched and not started yet (waiting for a thread, or for a slot of the event loop) did
not kill it. Before a thread or an event-loop slot starts a job, it writes the job's exact
payload bytes (as they sit in the private list, so no parse is needed and an unreadable
payload is marked too) into the process's hash ``<identity>:started`` under its own slot:
one HSET, overwriting the slot's previous job, so the hash has at most ``concurrency +
async_concurrency`` fields and needs no clean-up per job. The mark is written before
``perform`` is called: a job that kills its process at once has been marked.

Recovery (:meth:`rfetch.worker.recovery.OrphanRecovery.reap`) reads the hash once per
dead process: a job whose payload is in it is counted, one whose payload is not is pushed
back without counting.
"""

from __future__ import annotations

import logging

import redis
from redis.exceptions import RedisError

from rfetch.store.keys import Keys
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.manager")


class StartMarks:
    """Writes the start marks of one process.

    Args:
        client: the worker's Redis client.
        keys: key names.
        identity: the process identity ``host:pid:hex``.
    """

    def __init__(self, client: redis.Redis, keys: Keys, identity: str) -> None:
        self.redis = client
        self.key = keys.started(identity)

    def mark(self, slot: str, unit: UnitOfWork) -> None:
        """Note that ``slot`` (a thread's or a loop slot's name) starts ``unit`` now.

        Never raises: when Redis does not answer, the job still runs (it would fail on its
        own Redis writes anyway) and, should the process die running it, its recovery is
        not counted; the error is logged.
        """
        try:
            self.redis.hset(self.key, slot, unit.raw)
        except (RedisError, OSError) as exc:
            log.warning("could not write a start mark (%s): %s", unit.queue, exc)


def started_payloads(client: redis.Redis, keys: Keys, identity: str) -> frozenset[bytes]:
    """The payloads ``identity``'s threads and loop slots started last (its start marks),
    exact bytes.

    Raises:
        redis.exceptions.RedisError: Redis could not be read.
    """
    values: list[bytes] = client.hvals(keys.started(identity))  # type: ignore[assignment]
    return frozenset(values)
