"""One execution of a fetched job, as the processor carries it from start to end."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rfetch.errors import UnknownJob
from rfetch.jobs.job import Job
from rfetch.jobs.job_control import JobControl
from rfetch.jobs.payload import Payload
from rfetch.worker.unit import UnitOfWork


@dataclass
class JobRun:
    """One execution of a fetched job, carried through the server steps
    (:mod:`rfetch.worker.steps`): the job, its coalesced followers, its class (None for a
    name this worker does not know), its start (``time.perf_counter``), ``perform``'s
    arguments and, once made, its instance and its time limit and cancel flag."""

    unit: UnitOfWork
    job: Payload
    followers: list[tuple[UnitOfWork, Payload]] = field(default_factory=list)
    cls: type[Job] | None = None
    started: float = 0.0
    args: list[object] = field(default_factory=list)
    """``perform``'s arguments (the job's own, or a coalesced key's)."""
    instance: Job | None = None
    control: JobControl | None = None
    value: object = None
    """What ``perform`` returned (recorded for a ``store_result`` job)."""
    ack_as: UnitOfWork | None = None
    """What to acknowledge on success instead of ``unit`` (a ``store_result`` job's
    :class:`~rfetch.worker.outcome.RecordedUnit`)."""

    def owned(self) -> bool:
        """Whether this execution still owns its outcome (acknowledge it or record its
        failure): False when the timekeeper's hard path recorded it first."""
        return self.control is None or self.control.finish()

    def instantiate(self) -> Job:
        """A new instance of the class, with its jid (part of the execution: whatever it
        raises fails the job).

        Raises:
            UnknownJob: no class of the job's name is registered in this worker.
        """
        if self.cls is None:
            raise UnknownJob(
                f"no job named {self.job['class']!r} is registered in this worker (is the "
                "module that defines it passed with -r, and deployed?)"
            )
        self.instance = self.cls()
        self.instance.jid = self.job["jid"]
        bid = self.job.get("bid")
        if isinstance(bid, str) and bid:
            self.instance.bid = bid
        return self.instance

    def elapsed_ms(self) -> float:
        """Milliseconds since the start, rounded to microseconds."""
        return round((time.perf_counter() - self.started) * 1000, 3)
