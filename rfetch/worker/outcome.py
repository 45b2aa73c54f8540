"""The end of a job whose outcome is recorded (``store_result``): its acknowledgement or
death written with its record by ``complete.lua``, so the record exists exactly when the job
was acknowledged. A success is a :class:`RecordedUnit` handed to the processor's deferred
acknowledgements: the fetcher sends the pending ones in one pipeline (each its own atomic
call) just before its next ``fetch.lua`` call; a death, or an acknowledgement while not
deferring, is one call now, retried until Redis answers."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from rfetch.errors import ArgsNotSerializable, ResultNotSerializable
from rfetch.jobs.payload import check_args
from rfetch.store.connection import REDIS_DOWN
from rfetch.store.workflow_commands import Ending, WorkflowCommands
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.outcome")


def recorded_ttl(unit: UnitOfWork) -> int | None:
    """Seconds to keep ``unit``'s record, or None for a job whose outcome is not recorded."""
    return unit.routing.store_result if unit.routing is not None else None


def result_text(value: object) -> str:
    """A return value as compact JSON text.

    Raises:
        ResultNotSerializable: the value is not native JSON (path of the first bad value).
    """
    try:
        check_args(value, "result")
    except ArgsNotSerializable as exc:
        raise ResultNotSerializable(
            f"{exc} (a store_result job must return native JSON: str, int, float, bool, "
            "None, list, dict with str keys)"
        ) from None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def record_end(
    unit: UnitOfWork, job_class: str, ending: Ending, give_up: float | None = None
) -> bool:
    """Acknowledge or bury ``unit`` with its record (``complete.lua``), retried until
    Redis answers (as an acknowledgement is).

    Args:
        unit: the job, in a private list; its routing holds ``store_result``.
        job_class: its class name, kept in the record.
        ending: how it ended.
        give_up: ``time.monotonic()`` deadline after which to stop trying (shutdown): the
            job then stays in its private list and is recovered as an orphan.

    Returns:
        True if this call removed the job; False if it was no longer in its private list
        or we gave up.
    """
    assert unit.routing is not None  # a recorded job always has its routing read
    commands = WorkflowCommands(unit.fetch.commands)
    delay, warned = 0.05, False
    while True:
        try:
            removed, released = commands.complete(
                unit.private_key, unit.queue, unit.raw, unit.routing, job_class, ending
            )
        except REDIS_DOWN as exc:
            if not warned:
                log.warning("recording jid=%s failed, retrying until Redis answers: %s",
                            unit.jid, exc)
                warned = True
            if give_up is not None and time.monotonic() + delay > give_up:
                log.error("recording abandoned at shutdown; the job stays in its private list")
                return False
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        if released:
            log.info("jid=%s %s: released %d waiting job(s)", unit.jid, ending.status, released)
        return removed


@dataclass(frozen=True, slots=True, eq=False)
class RecordedUnit(UnitOfWork):
    """A finished ``store_result`` job with its record: acknowledging it writes both.

    Attributes:
        job_class: the job's class name, kept in the record.
        ending: how it ended (its return value).
    """

    job_class: str = ""
    ending: Ending | None = None

    @classmethod
    def of(cls, unit: UnitOfWork, job_class: str, ending: Ending) -> RecordedUnit:
        """``unit`` with its record."""
        return cls(unit.queue, unit.raw, unit.private_key, unit.routing, unit.fetch,
                   job_class, ending)

    def acknowledge(self, give_up: float | None = None) -> bool:
        """Remove the job from its private list with its record (``complete.lua``)."""
        assert self.ending is not None
        return record_end(self, self.job_class, self.ending, give_up)


def settle_recorded(acks: Sequence[UnitOfWork]) -> list[UnitOfWork]:
    """Write the ends of the :class:`RecordedUnit` among ``acks`` in one pipeline (one
    round trip; each ``complete.lua`` call atomic on its own); the other acknowledgements.

    Raises:
        redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable; the ends may
            or may not have been written (repeating one that was finds nothing to remove
            and writes nothing).
    """
    recorded = [u for u in acks if isinstance(u, RecordedUnit)]
    if not recorded:
        return list(acks)
    pipe = recorded[0].fetch.redis.pipeline(transaction=False)
    commands = WorkflowCommands(recorded[0].fetch.commands)
    for unit in recorded:
        assert unit.routing is not None and unit.ending is not None
        commands.complete(unit.private_key, unit.queue, unit.raw, unit.routing,
                          unit.job_class, unit.ending, client=pipe)
    for unit, reply in zip(recorded, pipe.execute(raise_on_error=False), strict=True):
        if isinstance(reply, Exception):  # a key of another type: the job stays held
            log.error("the end of jid=%s was not written (%s); it stays in %s", unit.jid,
                      reply, unit.private_key)
    return [u for u in acks if not isinstance(u, RecordedUnit)]
