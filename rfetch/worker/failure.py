"""What a failure does to a job's payload, and whether it is retried: Sidekiq 7's
``JobRetry`` arithmetic (error fields, the ``retry``/``retry_queue`` options, the class's
``retry_in``, the backoff formula, the compressed backtrace), without any Redis write. The
worker's :class:`rfetch.worker.retry.JobRetry` writes what :func:`mark_failed` decides;
``rfetch.testing``'s fake mode keeps it in memory (``drain(retries=True)``)."""

from __future__ import annotations

import base64
import json
import logging
import math
import random
import traceback
import zlib
from dataclasses import dataclass
from typing import Any, Literal

from rfetch.config import Config
from rfetch.jobs.job import Job
from rfetch.jobs.payload import Payload

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


@dataclass(frozen=True)
class Decision:
    """What happens to a failed job.

    Attributes:
        outcome: ``"retry"`` (to the retry set at ``at``), ``"kill"`` (retries exhausted,
            or ``retry_in`` said so: the dead set, unless ``"dead": false``), ``"no-retry"``
            (``retry: false``: dropped, the death handlers run) or ``"discard"``
            (``retry_in`` said so: dropped, no hook runs).
        at: the retry time, float epoch seconds (0.0 unless ``outcome`` is ``"retry"``).
    """

    outcome: Literal["retry", "kill", "no-retry", "discard"]
    at: float = 0.0


def mark_failed(
    job: Payload,
    instance: Job | None,
    exc: BaseException,
    config: Config,
    rng: random.Random,
    now: float,
) -> Decision:
    """Record a failure in ``job`` (changed in place: Sidekiq's error fields, ``queue``
    from ``retry_queue``) and decide its fate, as Sidekiq 7's ``JobRetry`` does.

    Args:
        job: the failed payload.
        instance: the job object, for ``retry`` (when the payload has none) and
            ``retry_in``; None when the class is unknown.
        exc: what the job raised.
        config: ``max_retries``, ``backtrace_lines_default``.
        rng: the backoff's jitter.
        now: the failure time, float epoch seconds.
    """
    if job.get("retry") is None:
        # Sidekiq's job_retry.rb: a payload without "retry" takes the job class's option
        # (a raw producer that leaves it out must not lose the class's retries).
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
    else:  # missing, or a value a producer wrote that is not a count: start again
        job["failed_at"] = now
        job["retry_count"] = 0
    limit = backtrace_lines(job.get("backtrace"), config.backtrace_lines_default)
    if limit:
        job["error_backtrace"] = compress_backtrace(exc, limit)
    if job.get("retry") is False:
        return Decision("no-retry")
    count = job["retry_count"]
    decision = retry_decision(instance, count, exc, job)
    if decision == "discard":
        return Decision("discard")
    if decision != "kill" and count < max_attempts(job.get("retry"), config.max_retries):
        delay = backoff_seconds(count, rng) if decision is None else float(decision)
        return Decision("retry", now + delay)
    return Decision("kill")


def retry_decision(
    instance: Job | None, count: int, exc: BaseException, job: Payload
) -> float | str | None:
    """The class's ``retry_in(count, exc, job)``: seconds (float), ``"kill"``,
    ``"discard"``, or None for the default backoff (also when the hook raises or returns
    anything else, logged, as Sidekiq falls back)."""
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

