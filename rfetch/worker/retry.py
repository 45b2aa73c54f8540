"""Failures: Sidekiq 7's retry backoff, the retry set, the dead set and death handlers.

Each outcome is written by one conditional Lua call that also acknowledges the job
(``settle.lua``), so a failed job is in the private list or in the retry/dead set, never in
both and never in neither. Hooks and death handlers run after that write, once.

:meth:`JobRetry.kill` is the one way a job reaches the dead set from a worker: retries
exhausted, an invalid payload, and orphan recovery's poison pills all go through it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import random
import time
import traceback
import zlib
from typing import Any

from rfetch.config import Config
from rfetch.errors import InvalidJob, OverLimit
from rfetch.job import Job
from rfetch.payload import Payload, dumps, loads
from rfetch.store.keys import Keys
from rfetch.worker import overlimit
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.retry")

ERROR_MESSAGE_LIMIT = 10_000
"""Characters of ``error_message`` kept (Sidekiq 7 truncates at 10,000)."""


def backoff_seconds(count: int, rng: random.Random | None = None) -> float:
    """Sidekiq 6.2.2-7.x delay before retry number ``count`` (0-based), in seconds:
    ``count**4 + 15 + rand(10) * (count + 1)``."""
    jitter = (rng or random).randrange(10)
    return float(count**4 + 15 + jitter * (count + 1))


def max_attempts(retry: Any, default_max: int) -> int:
    """Retries allowed by the payload's ``retry`` field: True -> ``default_max``, an int -> it,
    False / missing / other -> 0."""
    if retry is True:
        return default_max
    if isinstance(retry, int) and not isinstance(retry, bool):
        return max(retry, 0)
    return 0


def error_class_name(exc: BaseException) -> str:
    """``module.Class`` of an exception; builtins by bare name (``ValueError``)."""
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def backtrace_lines(value: Any, default: int) -> int:
    """Lines of backtrace to store for the payload's ``backtrace`` option: ``default`` for
    True, a positive integer as given, else 0 (none; a value a producer wrote that is not
    one of these is ignored, never an error)."""
    if value is True:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return 0


def attempts_id(raw: bytes, job: Payload | None) -> str:
    """The name under which rfetch's own failures on a job are counted: its jid when the
    payload carries one, else ``sha1-<hex digest of the payload>`` (a jid that
    :func:`rfetch.payload.loads` made up differs at every parse)."""
    if job is not None and job["jid"].encode() in raw:
        return str(job["jid"])
    return "sha1-" + hashlib.sha1(raw).hexdigest()


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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


def compress_backtrace(exc: BaseException, limit: int) -> str:
    """Sidekiq's ``error_backtrace``: base64 of zlib-deflated JSON of the lines, innermost
    first, in Ruby's ``file:line:in `method'`` form."""
    frames = traceback.extract_tb(exc.__traceback__)
    lines = [f"{f.filename}:{f.lineno}:in `{f.name}'" for f in reversed(frames)][:limit]
    return base64.b64encode(zlib.compress(json.dumps(lines).encode())).decode("ascii")


def decompress_backtrace(text: str) -> list[str]:
    """Inverse of :func:`compress_backtrace` (also reads Sidekiq's own)."""
    lines: list[str] = json.loads(zlib.decompress(base64.b64decode(text)))
    return lines


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
    ) -> str:
        """Send a job to the dead set (the morgue), or discard it if its payload says
        ``"dead": false``, atomically with its removal from the private list; then, if this
        call removed it, run the class's ``retries_exhausted`` and the death handlers
        (Sidekiq's ``retries_exhausted`` / ``death_handlers``).

        Args:
            unit: the job, in a private list (this process's, or a dead process's for a
                poison pill).
            job: its parsed payload, as it should be stored (with the error fields); None
                for an invalid payload, stored exactly as fetched.
            exc: why it dies, for the hooks.
            instance: the job object, for ``retries_exhausted``; None when unknown.

        Returns:
            ``"dead"``, ``"discarded"`` or ``"lost-ownership"`` (no longer in the private
            list: nothing was written and no hook ran).
        """
        now = time.time()
        if job is not None and job.get("dead") is False:
            owned = unit.acknowledge()
            outcome = "discarded"
        else:
            owned = unit.settle(
                self.keys.dead,
                now,
                _stored(unit, job),
                trim_before=now - self.config.dead_timeout,
                cap=self.config.dead_max_jobs,
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
        now = time.time()
        if job.get("retry") is None:
            # Sidekiq's job_retry.rb: a payload without "retry" takes the job class's option
            # (a raw producer that leaves it out must not lose the class's retries).
            job["retry"] = instance.retry if instance is not None else True
        retry_queue = job.get("retry_queue")
        if isinstance(retry_queue, str) and retry_queue:
            job["queue"] = retry_queue
        job["error_message"] = str(exc)[:ERROR_MESSAGE_LIMIT]
        job["error_class"] = error_class_name(exc)
        if _is_count(job.get("retry_count")):
            job["retried_at"] = now
            job["retry_count"] += 1
        else:  # missing, or a value a producer wrote that is not a count: start again
            job["failed_at"] = now
            job["retry_count"] = 0
        count: int = job["retry_count"]
        limit = backtrace_lines(job.get("backtrace"), self.config.backtrace_lines_default)
        if limit:
            job["error_backtrace"] = compress_backtrace(exc, limit)

        if job.get("retry") is False:
            # No retry set and no dead set; death handlers still run (Sidekiq's job_retry.rb).
            if unit.acknowledge():
                self._run_death_handlers(job, exc)
            return "discarded"

        decision = self._retry_in(instance, count, exc, job)
        if decision == "discard":
            unit.acknowledge()
            log.info("job %s jid=%s discarded by retry_in", job["class"], job["jid"])
            return "discarded"
        if decision != "kill" and count < max_attempts(job.get("retry"), self.config.max_retries):
            delay = backoff_seconds(count, self.rng) if decision is None else float(decision)
            skip = instance is not None and instance.key_on_failure == "skip"
            written = unit.settle(
                self.keys.retry,
                now + delay,
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
        if dead:
            return self.kill(unit, job, exc)
        if not unit.acknowledge():
            return "lost-ownership"
        self._run_death_handlers(job, exc)
        return "discarded"

    def _retry_in(
        self, instance: Job | None, count: int, exc: BaseException, job: Payload
    ) -> float | str | None:
        if instance is None:
            return None
        try:
            decision = instance.retry_in(count, exc, job)
        except Exception as hook_exc:  # Sidekiq falls back to the default on a broken hook
            log.error("retry_in of %s raised %r; using the default backoff", job["class"], hook_exc)
            return None
        if decision is None or decision in ("discard", "kill"):
            return decision
        if (
            isinstance(decision, (int, float))
            and not isinstance(decision, bool)
            and math.isfinite(decision)
        ):
            return float(decision)
        log.error("retry_in of %s returned %r; using the default backoff", job["class"], decision)
        return None

    def _run_death_handlers(self, job: Payload, exc: BaseException) -> None:
        for handler in self.config.death_handlers:
            try:
                handler(job, exc)
            except Exception as handler_exc:
                log.error("death handler %r raised %r", handler, handler_exc)
