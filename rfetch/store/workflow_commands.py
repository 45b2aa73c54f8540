"""The typed calls of the workflow scripts (``complete.lua``, ``depend.lua``,
``cancel_waiting.lua``, ``abandon.lua``): the only
code that knows their KEYS and ARGV order. Built on a :class:`Commands` (its client, keys
and the scripts :mod:`rfetch.store.scripts` loads)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from redis.client import Pipeline

from rfetch.jobs.payload import Routing
from rfetch.store.commands import Commands, queue_script
from rfetch.store.job_record import job_record
from rfetch.store.outcomes import JobOutcome

Status = Literal["succeeded", "dead"]
"""The outcome a record holds: the job was acknowledged, or died (dead set or discarded)."""


@dataclass(frozen=True)
class Ending:
    """How a recorded job ended, for :meth:`WorkflowCommands.complete`.

    Attributes:
        status: ``"succeeded"`` or ``"dead"``.
        ttl: seconds to keep the record (the job's ``store_result``).
        result: the return value as JSON text (success).
        error_class, error_message: why it died.
        dead_payload: what to store in the dead set; None to store nothing (a success, or a
            discarded job).
        trim_before: dead set: drop entries scored below this (float epoch seconds).
        cap: dead set: keep at most this many entries.
        outcome: how it ended when not the status's own (:class:`JobOutcome`: a death may
            be ``EXPIRED`` or ``DISCARDED``); None: ``SUCCEEDED`` or ``DIED``.
    """

    status: Status
    ttl: int
    result: str = ""
    error_class: str = ""
    error_message: str = ""
    dead_payload: bytes | str | None = None
    trim_before: float | None = None
    cap: int | None = None
    outcome: JobOutcome | None = None


@dataclass(frozen=True)
class Dependent:
    """One job for :meth:`WorkflowCommands.depend`: its jid, queue, payload (JSON text),
    the jid or bid it waits on (None: pushed to its queue now) and its routing fields
    (None: read from the payload)."""

    jid: str
    queue: str
    text: str
    after: str | None = None
    routing: Routing | None = None

    def record(self) -> str:
        """Its record for ``depend.lua`` (:func:`rfetch.store.job_record.job_record`)."""
        routing = self.routing or Routing.parse(self.text) or Routing()
        return job_record(self.queue, replace(routing, jid=self.jid), after=self.after)


class WorkflowCommands:
    """``complete.lua``, ``depend.lua``, ``cancel_waiting.lua`` and ``abandon.lua`` behind
    one method each.

    Args:
        commands: the client's :class:`Commands` (Redis client, keys, scripts).
    """

    def __init__(self, commands: Commands) -> None:
        self.commands = commands
        self.keys = commands.keys
        self.redis = commands.redis

    def _fixed(self) -> list[str]:
        k = self.keys
        return [k.prefix, k.waiting, k.dead, k.queues, k.deps_cancelled, k.results_stored]

    def complete(
        self,
        private_key: str,
        queue: str,
        raw: bytes,
        routing: Routing,
        job_class: str,
        ending: Ending,
        client: Pipeline | None = None,
    ) -> tuple[bool, int]:
        """``complete.lua``: take a recorded job out of its private list, record how it
        ended (with the dead-set write of a death), wake ``rfetch.result`` and release the
        jobs waiting on it, in one atomic step; a keyed or unique job's key and lock are
        released as ``finish.lua`` does.

        Args:
            client: a pipeline to queue the call on (its reply is then the pipeline's
                ``[removed, released]``; several jobs' ends go in one round trip, each its
                own atomic call).

        Returns:
            (whether this call removed the job, how many waiting jobs it released); (True,
            0) on a pipeline.

        Raises:
            redis.exceptions.ResponseError: a key holds another type, or a number is bad:
                nothing was changed.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        ok = ending.status == "succeeded"
        outcome = ending.outcome or (JobOutcome.SUCCEEDED if ok else JobOutcome.DIED)
        failure = "" if ok else json.dumps(
            {"error_class": ending.error_class, "error_message": ending.error_message}
        )
        recorded = replace(routing, store_result=ending.ttl, job_class=job_class)
        keys = [private_key, self.keys.prefix]
        args: list[bytes | str] = [
            raw,
            job_record(queue, recorded),
            outcome.value,
            ending.result,
            ending.error_class,
            ending.error_message,
            ending.dead_payload or "",
            "" if ending.trim_before is None else repr(ending.trim_before),
            "" if ending.cap is None else str(ending.cap),
            failure if routing.bid else "",
        ]
        if client is not None:
            queue_script(self.commands.scripts.complete, client, keys=keys, args=args)
            return True, 0
        removed, released = self.commands.scripts.complete(
            keys=keys, args=args, client=self.redis
        )
        return bool(int(removed)), int(released)

    def depend(self, jobs: Sequence[Dependent]) -> list[str]:
        """``depend.lua``: push ``jobs`` in order, all or none; a job with ``after`` waits
        for that job's outcome (or is settled at once if it is recorded).

        Returns:
            Per job: ``"queued"``, ``"waiting"``, ``"dead"`` or ``"cancelled"``.

        Raises:
            redis.exceptions.ResponseError: a key holds another type: nothing was written.
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable (the call
                wrote every job or none).
        """
        args: list[str | int] = [len(jobs)]
        for job in jobs:
            args += [job.text, job.record()]
        reply = self.commands.scripts.depend(keys=self._fixed(), args=args, client=self.redis)
        return [r.decode() if isinstance(r, bytes) else str(r) for r in reply]

    def cancel_waiting(
        self, jid: str, after: str, dead: bool, reason: str, entry: bytes | str = ""
    ) -> tuple[bool, int]:
        """``cancel_waiting.lua``: drop (or bury, ``dead``) the job ``jid`` waiting on
        ``after`` (a jid, or a bid with ``entry``: the job's exact entry in the batch's
        waiting list), and settle the jobs waiting on it.

        Returns:
            (whether it was waiting there, how many jobs behind it were settled).
        """
        outcome = JobOutcome.DIED if dead else JobOutcome.CANCELLED
        record = job_record("", Routing(jid=jid), after=after)
        done, settled = self.commands.scripts.cancel_waiting(
            keys=self._fixed(), args=[record, outcome.value, reason, entry], client=self.redis
        )
        return bool(int(done)), int(settled)

    def abandon(
        self,
        jid: str,
        store_result: int | None,
        status: str,
        reason: str,
        job_class: str,
        bid: str | None = None,
        failure: str = "",
    ) -> int:
        """``abandon.lua``: a cancelled job's end (after it was taken out of its queue or
        set): its record if it has ``store_result`` (``status``: ``"cancelled"``, or
        ``"dead"`` when it went to the dead set), its death in batch ``bid`` (``failure``:
        the batch's failure JSON), and the jobs waiting on it settled.

        Returns:
            How many waiting jobs were settled.
        """
        routing = Routing(jid=jid, job_class=job_class, store_result=store_result, bid=bid)
        outcome = JobOutcome.DIED if status == "dead" else JobOutcome.CANCELLED
        keys = [self.keys.prefix]
        args = [job_record("", routing), outcome.value, reason, failure if bid else ""]
        return int(self.commands.scripts.abandon(keys=keys, args=args, client=self.redis))
