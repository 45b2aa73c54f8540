"""A failed job in fake mode with retries on: the worker's retry decision
(:func:`rfetch.worker.failure.mark_failed`: the error fields, ``retry``/``retry_queue``,
``retry_in``, Sidekiq's backoff) and its hooks (``retries_exhausted``, the death handlers,
the ``dead`` option), without the Redis writes: the fake queues keep the retry or the dead
job themselves."""

from __future__ import annotations

import logging
import random
from typing import Literal

from rfetch.config import Config
from rfetch.jobs.job import Job
from rfetch.jobs.payload import Payload
from rfetch.worker.failure import mark_failed

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
    worker's ``JobRetry.fail`` would, at ``now`` (epoch seconds of the fake clock), and run
    the hooks a worker would run.

    Returns:
        ``"retry"`` (``job["at"]`` is the retry time, epoch seconds), ``"dead"`` (for the
        dead set) or ``"discarded"`` (``retry: false``, ``dead: false``, or ``retry_in``
        said ``"discard"``).
    """
    decision = mark_failed(job, instance, exc, config, rng, now)
    if decision.outcome == "retry":
        job["at"] = decision.at
        job.pop("enqueued_at", None)
        return "retry"
    if decision.outcome == "discard":
        return "discarded"
    if decision.outcome == "kill" and instance is not None:
        try:
            instance.retries_exhausted(job, exc)
        except Exception as hook_exc:
            log.error("retries_exhausted of %s raised %r", job["class"], hook_exc)
    for handler in config.death_handlers:
        try:
            handler(job, exc)
        except Exception as handler_exc:
            log.error("death handler %r raised %r", handler, handler_exc)
    if decision.outcome == "no-retry" or job.get("dead") is False:
        return "discarded"
    return "dead"
