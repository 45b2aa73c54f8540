"""Durable jobs' server step: each execution's hold on its durable state, and the two
ends of a durable job that are neither a success nor a failure: an iterable job
interrupted at an item boundary (pushed back uncounted, resumes from its cursor) and a
job whose checkpoint was refused (another process owns it: left alone)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rfetch.durable.checkpoint import Hold
from rfetch.errors import CheckpointRefused, JobInterrupted
from rfetch.jobs.payload import Payload
from rfetch.store.checkpoint_commands import CheckpointCommands
from rfetch.store.connection import REDIS_DOWN
from rfetch.worker.job_run import JobRun
from rfetch.worker.steps import Step
from rfetch.worker.unit import UnitOfWork

if TYPE_CHECKING:
    from rfetch.jobs.job import Job

log = logging.getLogger("rfetch.job")

DURABLE_ENDS = (JobInterrupted, CheckpointRefused)
"""A durable job's ends that are neither success nor failure (:func:`durable_end`)."""


def durable_end(unit: UnitOfWork, job: Payload, exc: BaseException) -> bool:
    """Handle ``exc`` if it is one of those ends; False for any other exception (a failure).

    An interrupted job goes back to the head of its queue if still in the private list
    (``requeue.lua``), not counted as a retry nor as a recovery; if Redis is unreachable it
    stays in the private list, pushed back at shutdown or recovered as an orphan. A job
    whose checkpoint was refused is not in this process's private list any more: nothing is
    written for it.
    """
    extra = {"job_class": job["class"], "jid": job["jid"], "queue": unit.queue}
    if isinstance(exc, JobInterrupted):
        try:
            pushed = unit.requeue()
        except REDIS_DOWN as error:
            log.error("interrupted job not pushed back (%s); it stays in %s", error,
                      unit.private_key, extra=extra)
            return True
        log.info("%s; %s", exc, "pushed back" if pushed else "no longer ours", extra=extra)
        return True
    if isinstance(exc, CheckpointRefused):
        log.warning("%s", exc, extra=extra)
        return True
    return False


class Durable(Step):
    """The durable jobs' step: the instance's :class:`~rfetch.durable.checkpoint.Hold`
    (fenced by the exact payload in this process's private list), and the ends of
    :func:`durable_end` (outcomes ``"interrupted"`` and ``"refused"``)."""

    name = "durable"

    def begin(self, run: JobRun, instance: Job) -> None:
        """Give the instance its hold (no round trip)."""
        unit = run.unit
        instance.hold = Hold(CheckpointCommands(unit.fetch.commands), unit.private_key,
                             unit.raw, run.job["jid"])

    def claim(self, run: JobRun, exc: BaseException) -> str | None:
        """The durable end ``exc`` is, handled; None for any other exception."""
        if not isinstance(exc, DURABLE_ENDS) or not durable_end(run.unit, run.job, exc):
            return None
        return "interrupted" if isinstance(exc, JobInterrupted) else "refused"
