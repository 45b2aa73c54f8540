"""Failures: Sidekiq 7's retry backoff, the retry set, the dead set and death handlers.

Each outcome is written by one conditional Lua call that also acknowledges the job
(``settle.lua``), so a failed job is in the private list or in the retry/dead set, never in
both and never in neither. Hooks and death handlers run after that write, once.

:meth:`JobRetry.kill` is the one way a job reaches the dead set from a worker: retries
exhausted, an invalid payload, and orphan recovery's poison pills all go through it.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time

from rfetch.config import Config
from rfetch.errors import POISON_PILL_CLASS, InvalidJob, JobCancelled, OverLimit
from rfetch.jobs.job import Job
from rfetch.jobs.payload import Payload, dumps, loads
from rfetch.store.keys import Keys
from rfetch.store.outcomes import JobOutcome
from rfetch.store.workflow_commands import Ending
from rfetch.worker import overlimit
from rfetch.worker.failure import (
    ERROR_MESSAGE_LIMIT,
    backoff_seconds,
    backtrace_lines,
    compress_backtrace,
    decompress_backtrace,
    error_class_name,
    mark_failed,
    max_attempts,
)
from rfetch.worker.outcome import record_end, recorded_ttl
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.retry")

__all__ = [  # the retry arithmetic lives in rfetch.worker.failure; its names stay here too
    "ERROR_MESSAGE_LIMIT",
    "JobRetry",
    "attempts_id",
    "backoff_seconds",
    "backtrace_lines",
    "compress_backtrace",
    "decompress_backtrace",
    "error_class_name",
    "max_attempts",
]


def attempts_id(raw: bytes, job: Payload | None) -> str:
    """The name under which rfetch's own failures on a job are counted: its jid when the
    payload carries one, else ``sha1-<hex digest of the payload>`` (a jid that
    :func:`rfetch.jobs.payload.loads` made up differs at every parse)."""
    if job is not None and job["jid"].encode() in raw:
        return str(job["jid"])
    return "sha1-" + hashlib.sha1(raw).hexdigest()


def _stored(unit: UnitOfWork, job: Payload | None) -> bytes | str:
    """What the dead set keeps: the payload with its error fields, or the exact bytes
    fetched for an invalid payload (Sidekiq's rule) or one that cannot be written back
    (nesting too deep for the encoder)."""
    if job is None:
        return unit.raw
    try:
        return dumps(job, 2**62)
    except (ValueError, TypeError, RecursionError) as exc:
        log.error("jid=%s stored in the dead set exactly as fetched: %r", job.get("jid"), exc)
        return unit.raw


class JobRetry:
    """Decides and writes what happens to a failed job (Sidekiq's ``JobRetry``).

    Args:
        config: ``max_retries``, dead set limits (``dead_timeout`` seconds,
            ``dead_max_jobs``), ``death_handlers``.
        keys: key names of the namespace (the retry and dead sets).
        rng: random source for the backoff jitter.
    """

    def __init__(self, config: Config, keys: Keys, rng: random.Random | None = None) -> None:
        self.config = config
        self.keys = keys
        self.rng = rng or random.Random()

    def bury_invalid(self, unit: UnitOfWork, exc: Exception) -> str:
        """Put an unparseable payload in the dead set exactly as fetched (Sidekiq's rule);
        no death handler runs (there is no job to give them)."""
        log.error("invalid job in queue %s sent to the dead set: %s", unit.queue, exc)
        return self.kill(unit, None, exc)

    def kill(
        self,
        unit: UnitOfWork,
        job: Payload | None,
        exc: BaseException,
        instance: Job | None = None,
        keep: bool = False,
    ) -> str:
        """Send a job to the dead set (the morgue), or discard it if its payload says
        ``"dead": false`` (unless ``keep``), atomically with its removal from the private
        list; then, if this call removed it, run the class's ``retries_exhausted`` and the
        death handlers (Sidekiq's ``retries_exhausted`` / ``death_handlers``).

        Args:
            unit: the job, in a private list (this process's, or a dead process's for a
                poison pill).
            job: its parsed payload, as it should be stored (with the error fields); None
                for an invalid payload, stored exactly as fetched.
            exc: why it dies, for the hooks.
            instance: the job object, for ``retries_exhausted``; None when unknown.
            keep: the dead set even for a ``"dead": false`` payload (a cancel that asked
                for the dead set).

        Returns:
            ``"dead"``, ``"discarded"`` or ``"lost-ownership"`` (no longer in the private
            list: nothing was written and no hook ran).
        """
        now = time.time()
        if job is not None and job.get("dead") is False and not keep:
            owned = self._discard(unit, job, exc)
            outcome = "discarded"
        elif recorded_ttl(unit) is not None:
            owned = self._end(unit, job, exc, _stored(unit, job), now)  # names poison too
            outcome = "dead"
        else:
            owned = unit.settle(
                self.keys.dead,
                now,
                _stored(unit, job),
                trim_before=now - self.config.dead_timeout,
                cap=self.config.dead_max_jobs,
                outcome="poison" if _is_poison(job) else "dead",
            )
            outcome = "dead"
        if not owned:
            return "lost-ownership"
        if instance is not None and job is not None:
            try:
                instance.retries_exhausted(job, exc)
            except Exception as hook_exc:
                log.error("retries_exhausted of %s raised %r", job["class"], hook_exc)
        if job is not None:
            self._run_death_handlers(job, exc)
        return outcome

    def fail(self, unit: UnitOfWork, job: Payload, instance: Job | None, exc: BaseException) -> str:
        """Record a failure: retry set, dead set, or dropped.

        Args:
            unit: the fetched job.
            job: its parsed payload (changed in place with Sidekiq's error fields).
            instance: the job object, for ``retry_in`` / ``retries_exhausted``; None when the
                class is unknown.
            exc: what the job raised.

        Returns:
            ``"retry"``, ``"dead"``, ``"discarded"`` or ``"lost-ownership"`` (the job had
            been pushed back meanwhile and nothing was written).
        """
        decision = mark_failed(job, instance, exc, self.config, self.rng, time.time())
        if decision.outcome == "no-retry":
            # No retry set and no dead set; death handlers still run (Sidekiq's job_retry.rb).
            if self._discard(unit, job, exc):
                self._run_death_handlers(job, exc)
            return "discarded"
        if decision.outcome == "discard":
            self._discard(unit, job, exc)
            log.info("job %s jid=%s discarded by retry_in", job["class"], job["jid"])
            return "discarded"
        if decision.outcome == "retry":
            skip = instance is not None and instance.key_on_failure == "skip"
            written = unit.settle(
                self.keys.retry,
                decision.at,
                dumps(job, 2**62),
                outcome="skip" if skip else "retry",
            )
            return "retry" if written else "lost-ownership"
        return self.kill(unit, job, exc, instance)

    def overlimit(self, unit: UnitOfWork, job: Payload, exc: OverLimit) -> str:
        """A job over a limiter's limit (``rfetch.OverLimit`` out of ``perform``):
        rescheduled with the limiter's backoff, not a failure (``retry_count`` unchanged),
        until its ``reschedule`` maximum (see :mod:`rfetch.worker.overlimit`).

        Returns:
            ``"rescheduled"``, ``"lost-ownership"``, or ``"exhausted"``: nothing was
            written and the caller records a normal failure with :meth:`fail`.
        """
        return overlimit.reschedule(unit, job, exc, self.keys, self.rng)

    def rfetch_failed(self, unit: UnitOfWork, exc: BaseException) -> str:
        """rfetch itself failed on this job (recording its failure raised, Redis refused a
        write, a bug): log it, then push the job back to the head of its queue, counting
        such attempts per jid with orphan recovery's counter (``recover.lua``), and at
        ``poison_max_recoveries`` within ``poison_window`` send it to the dead set with the
        error recorded (``error_class`` / ``error_message``), as a poison pill (Sidekiq Pro
        5.2). So a job that makes rfetch fail runs a bounded number of times, never in an
        endless loop.

        Args:
            unit: the job, still in this process's private list.
            exc: what rfetch raised.

        Returns:
            ``"requeued"``, ``"dead"``, ``"discarded"`` (``"dead": false``), ``"gone"`` or
            ``"lost-ownership"`` (no longer in the private list), or ``"stuck"``: Redis
            refused both (unreachable, or a key of another type on the job's way); the job
            stays in its private list.
        """
        log.error("rfetch failed on a job of queue %s", unit.queue, exc_info=exc)
        try:
            return self._push_back_or_bury(unit, exc)
        except Exception as again:
            log.error(
                "could not push back or bury that job (%r); it stays in the private list %s",
                again,
                unit.private_key,
            )
            return "stuck"

    def _push_back_or_bury(self, unit: UnitOfWork, exc: BaseException) -> str:
        try:
            job: Payload | None = loads(unit.raw)
        except InvalidJob:
            job = None
        counter = attempts_id(unit.raw, job)
        outcome = unit.fetch.push_back_counted(unit, counter)
        what = f"{error_class_name(exc)}: {exc}"
        if outcome == "requeued":
            log.warning("jid=%s pushed back to queue %s after rfetch failed on it (%s)",
                        counter, unit.queue, what)
            return outcome
        if outcome == "gone":
            return outcome
        attempts = self.config.poison_max_recoveries
        message = f"rfetch failed on this job {attempts} times; the last time: {what}"
        if job is not None:
            job["error_class"] = error_class_name(exc)
            job["error_message"] = message[:ERROR_MESSAGE_LIMIT]
            job["failed_at"] = time.time()
        outcome = self.kill(unit, job, exc)
        if outcome != "lost-ownership":
            where = "discarded" if outcome == "discarded" else "sent to the dead set"
            log.error("jid=%s %s: %s", counter, where, message)
            unit.fetch.redis.delete(self.keys.recoveries(counter))
        return outcome

    def cancel(self, unit: UnitOfWork, job: Payload, exc: BaseException, dead: bool) -> str:
        """Record a cancelled job (``rfetch.api.cancel``): never retried; the dead set if
        ``dead`` was asked, else dropped; the death handlers run either way, with ``exc``
        (an ``rfetch.JobCancelled``), and ``retries_exhausted`` does not.

        Returns:
            ``"dead"``, ``"discarded"`` or ``"lost-ownership"``.
        """
        job["error_message"] = str(exc)[:ERROR_MESSAGE_LIMIT]
        job["error_class"] = error_class_name(exc)
        job.setdefault("failed_at", time.time())
        if dead:  # asked for: as the API's cancel of a waiting job, whatever "dead" says
            return self.kill(unit, job, exc, keep=True)
        if not self._discard(unit, job, exc):
            return "lost-ownership"
        self._run_death_handlers(job, exc)
        return "discarded"

    def _discard(self, unit: UnitOfWork, job: Payload | None, exc: BaseException) -> bool:
        """Drop a failed job (no dead set): acknowledged, and for a ``store_result`` job
        its ``dead`` record written with it. True if this call removed it."""
        if recorded_ttl(unit) is None:
            return unit.discard(job, _death_outcome(exc, None))
        return self._end(unit, job, exc, None, time.time())

    def _end(
        self,
        unit: UnitOfWork,
        job: Payload | None,
        exc: BaseException,
        stored: bytes | str | None,
        now: float,
    ) -> bool:
        """The death of a ``store_result`` job: ``complete.lua`` writes the dead set entry
        (``stored``; None: discarded) and its record (error class and message) in one
        step, and settles the jobs waiting on it. The record's status is the outcome's:
        ``cancelled`` for a job ended by ``rfetch.JobCancelled`` (as the API's cancel of a
        waiting job writes it), else ``dead``."""
        ttl = recorded_ttl(unit)
        assert ttl is not None
        error_class = str(job.get("error_class") or "") if job is not None else ""
        message = str(job.get("error_message") or "") if job is not None else ""
        ending = Ending(
            "dead",
            ttl,
            error_class=error_class or error_class_name(exc),
            error_message=message or str(exc)[:ERROR_MESSAGE_LIMIT],
            dead_payload=stored,
            trim_before=now - self.config.dead_timeout,
            cap=self.config.dead_max_jobs,
            outcome=JobOutcome.POISON if _is_poison(job) else _death_outcome(exc, stored),
        )
        name = str(job.get("class", "")) if job is not None else ""
        return record_end(unit, name, ending)

    def _run_death_handlers(self, job: Payload, exc: BaseException) -> None:
        for handler in self.config.death_handlers:
            try:
                handler(job, exc)
            except Exception as handler_exc:
                log.error("death handler %r raised %r", handler, handler_exc)


def _death_outcome(exc: BaseException, stored: bytes | str | None) -> JobOutcome:
    """The named outcome of a death (lua/lib/outcome.lua): cancelled for
    ``rfetch.JobCancelled``, else died (dead set) or discarded (``stored`` None)."""
    if isinstance(exc, JobCancelled):
        return JobOutcome.CANCELLED
    return JobOutcome.DIED if stored is not None else JobOutcome.DISCARDED


def _is_poison(job: Payload | None) -> bool:
    """Whether orphan recovery sends ``job`` to the dead set as a poison pill."""
    return job is not None and job.get("error_class") == POISON_PILL_CLASS
