"""A failed job in fake mode with retries on: the worker's retry decision (Sidekiq 7's
``JobRetry``: the error fields, ``retry``/``retry_queue``/``dead`` options, ``retry_in``,
``retries_exhausted``, the death handlers, the backoff formula), without the Redis writes:
the fake queues keep the retry or the dead job themselves."""

from __future__ import annotations

import logging
import math
import random
from typing import Literal

from rfetch.config import Config
from rfetch.job import Job
from rfetch.payload import Payload
from rfetch.worker.retry import (
    ERROR_MESSAGE_LIMIT,
    backoff_seconds,
    backtrace_lines,
    compress_backtrace,
    error_class_name,
    max_attempts,
)

log = logging.getLogger("rfetch.testing")

Outcome = Literal["retry", "dead", "discarded"]


def fail(
    job: Payload,
    instance: Job | None,
    exc: BaseException,
    config: Config,
    now: float,
    rng: random.Random,
) -> Outcome:
    """Record a failure of ``job`` (changed in place with Sidekiq's error fields) as a
    worker's ``JobRetry.fail`` would, at ``now`` (epoch seconds of the fake clock).

    Returns:
        ``"retry"`` (``job["at"]`` is the retry time, epoch seconds), ``"dead"`` (for the
        dead set) or ``"discarded"`` (``retry: false``, ``dead: false``, or ``retry_in``
        said ``"discard"``).
    """
    if job.get("retry") is None:
        job["retry"] = instance.retry if instance is not None else True
    retry_queue = job.get("retry_queue")
    if isinstance(retry_queue, str) and retry_queue:
        job["queue"] = retry_queue
    job["error_message"] = str(exc)[:ERROR_MESSAGE_LIMIT]
    job["error_class"] = error_class_name(exc)
    count = job.get("retry_count")
    if isinstance(count, int) and not isinstance(count, bool):
        job["retried_at"] = now
        job["retry_count"] = count + 1
    else:
        job["failed_at"] = now
        job["retry_count"] = 0
    count = job["retry_count"]
    limit = backtrace_lines(job.get("backtrace"), config.backtrace_lines_default)
    if limit:
        job["error_backtrace"] = compress_backtrace(exc, limit)
    if job.get("retry") is False:
        _death_handlers(config, job, exc)
        return "discarded"
    decision = _retry_in(instance, count, exc, job)
    if decision == "discard":
        return "discarded"
    if decision != "kill" and count < max_attempts(job.get("retry"), config.max_retries):
        delay = backoff_seconds(count, rng) if decision is None else float(decision)
        job["at"] = now + delay
        job.pop("enqueued_at", None)
        return "retry"
    if instance is not None:
        try:
            instance.retries_exhausted(job, exc)
        except Exception as hook_exc:
            log.error("retries_exhausted of %s raised %r", job["class"], hook_exc)
    _death_handlers(config, job, exc)
    return "discarded" if job.get("dead") is False else "dead"


def _retry_in(
    instance: Job | None, count: int, exc: BaseException, job: Payload
) -> float | str | None:
    """The class's ``retry_in`` decision, as the worker reads it (a broken hook or a bad
    value: the default backoff)."""
    if instance is None:
        return None
    try:
        decision = instance.retry_in(count, exc, job)
    except Exception as hook_exc:
        log.error("retry_in of %s raised %r; using the default backoff", job["class"], hook_exc)
        return None
    if decision is None or decision in ("discard", "kill"):
        return decision
    if isinstance(decision, (int, float)) and not isinstance(decision, bool) and math.isfinite(
        decision
    ):
        return float(decision)
    log.error("retry_in of %s returned %r; using the default backoff", job["class"], decision)
    return None


def _death_handlers(config: Config, job: Payload, exc: BaseException) -> None:
    for handler in config.death_handlers:
        try:
            handler(job, exc)
        except Exception as handler_exc:
            log.error("death handler %r raised %r", handler, handler_exc)
