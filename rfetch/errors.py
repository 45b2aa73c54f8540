"""Every exception rfetch raises on purpose."""

from __future__ import annotations

import sysconfig
import traceback
from collections.abc import Callable
from typing import Any


class RfetchError(Exception):
    """Base class of rfetch's own errors."""


class ConfigError(RfetchError, ValueError):
    """A configuration value is out of range or malformed."""


class RequireFailed(ConfigError):
    """Importing a ``-r`` target raised: the message names the target, the exception and
    its last frame outside the standard library (the application's line that raised, not
    ``os.environ``'s ``__getitem__``); the exception is the ``__cause__``, with its whole
    traceback (``rfetch worker --verbose`` logs it).

    Args:
        target: the ``-r`` value.
        exc: what the import raised.
    """

    def __init__(self, target: str, exc: BaseException) -> None:
        stdlib = sysconfig.get_paths()["stdlib"]
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__)
            if not f.filename.startswith(("<", stdlib))
        ]
        where = f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if (
            frames
        ) else ""
        super().__init__(
            f"-r {target}: importing it raised {type(exc).__name__}: {exc}{where} "
            "(--verbose logs the traceback)"
        )


class ArgsNotSerializable(RfetchError, TypeError):
    """Job arguments contain a value that is not native JSON.

    Only ``str``, ``int``, ``float`` (finite), ``bool``, ``None``, ``list`` and ``dict`` with
    ``str`` keys travel, as with Sidekiq's strict args. The message names the path of the
    first bad value, e.g. ``args[1]['when']``.
    """


class PayloadTooLarge(RfetchError, ValueError):
    """The serialised job is larger than ``Config.max_payload_bytes``; nothing was written."""


class UnknownJob(RfetchError):
    """A worker fetched a job whose class name no imported module registered.

    The job fails and is retried (then dies), so a deploy skew loses nothing.
    """


class InvalidJob(RfetchError):
    """A fetched payload is not a job: bad JSON or a wrong shape. It goes to the dead set."""


class DuplicateJobName(RfetchError):
    """Two job classes registered the same name in one worker."""


class BufferFull(RfetchError):
    """Redis is unreachable and the client's reliable-push buffer is full; the job was not
    accepted (never dropped silently; Sidekiq Pro 7.1.4 also raises here)."""


class BulkPushError(RfetchError):
    """A ``push_bulk`` / ``perform_bulk`` given a ``batch_size`` smaller than its job count
    failed part-way: Redis refused one batch (``__cause__`` is its error). Each batch is
    written all or none, so exactly the jobs in ``jids`` (the batches before the failing
    one) were written, and none of the others: retry only ``args_list[written:]``.

    Attributes:
        jids: the jids written, in push order (jobs dropped by client middleware or whose
            unique lock was held are left out, as in the return value).
        written: how many entries of ``args_list``, from the first, were handled (written,
            dropped or refused as duplicates).
    """

    def __init__(self, message: str, jids: list[str], written: int) -> None:
        super().__init__(message)
        self.jids = jids
        self.written = written


class JobTimeout(RfetchError):
    """A job ran past its time limit (the job option ``timeout``, else the worker's
    ``--job-timeout``).

    Raised inside the job by ``self.check_cancelled()`` once ``self.deadline`` has passed
    (the cooperative path), and recorded by the worker as the error of a job still running
    ``timeout + job_timeout_grace`` seconds after it started (the hard path, see
    docs/guarantees.md). Either way the job fails the normal way: retry set, then dead set,
    with ``error_class`` ``rfetch.JobTimeout``.
    """


class JobCancelled(RfetchError):
    """The job was cancelled (``rfetch.api.cancel``, ``rfetch cancel JID``, the web UI).

    Raised inside the job by ``self.check_cancelled()`` once a cancel was requested (the
    cooperative path), and recorded by the worker as the error of a cancelled job still
    running ``job_timeout_grace`` seconds after the request (the hard path). A cancelled job
    is never retried: it goes to the dead set only if the cancel asked for it, and the death
    handlers see this exception. ``error_class`` is ``rfetch.JobCancelled``.
    """


class ArgsMismatch(RfetchError, TypeError):
    """A push's arguments do not fit the job's ``perform`` (too few, too many, or a
    keyword-only parameter without a default). Raised at push time, when the job class is
    known, instead of failing in the worker on every retry; nothing was written."""


class UnrunnableJobWarning(UserWarning):
    """A job is pushed under a name no worker can register: its class is defined in
    ``__main__`` (the script being run), which a worker imports under the module's own
    name. Define job classes in a module the script imports, or give the class a ``name``."""


# Recorded as ``error_class`` (``module.Class``): the public names, not rfetch.errors.
JobTimeout.__module__ = "rfetch"
JobCancelled.__module__ = "rfetch"


class QueueFull(RfetchError):
    """A push would take a queue past its ``max_queue_size`` (``Config.max_queue_size``):
    nothing of the call was written (a bulk push: none of its batch). Backpressure: slow
    the producer down, or raise the size. Jobs already in the push buffer, scheduled jobs
    and retries are not refused (they were accepted before; see docs/flow-control.md)."""


class RedisUnavailable(RfetchError):
    """Redis could not be reached where rfetch checks it once at start: no sentinel of a
    ``redis+sentinel://`` URL answered (a clear error instead of a hang)."""


class BatchError(RfetchError):
    """A batch (Sidekiq Pro batches) refused jobs: it does not exist (expired), it has
    succeeded, its parent does not exist or has succeeded, or its first ``jobs()`` block
    pushed no job. Nothing of the ``jobs()`` block was written."""


class BatchNotFound(BatchError, KeyError):
    """No batch of that bid exists (never created, or expired: 24 h after success, 30 days
    otherwise by default)."""


class ResultNotSerializable(RfetchError, TypeError):
    """A ``store_result`` job returned a value that is not native JSON (the rule of job
    arguments). The execution fails (retried as any failure), naming the bad value's path,
    e.g. ``result['when'] is a datetime``; nothing is recorded."""


class ResultTimeout(RfetchError, TimeoutError):
    """``rfetch.result`` waited its whole timeout and the job has no recorded outcome yet
    (pending, running, retrying or waiting on a dependency)."""


class UnknownResult(ResultTimeout):
    """``rfetch.result`` waited its whole timeout and finds no trace of the jid: no record
    (never pushed with ``store_result``, or its record expired), and the job is in no queue,
    set, private list or waiting list."""


class JobDied(RfetchError):
    """``rfetch.result`` of a job that died (dead set, discarded, or its dependency died).

    Attributes:
        jid: the job.
        error_class: the recorded error's class (``rfetch.DependencyFailed`` when its
            dependency died).
        error_message: the recorded message.
        status: ``"dead"`` or ``"cancelled"``.
    """

    def __init__(self, jid: str, error_class: str, error_message: str, status: str) -> None:
        super().__init__(f"job {jid} {status}: {error_class}: {error_message}")
        self.jid = jid
        self.error_class = error_class
        self.error_message = error_message
        self.status = status
class OverLimit(RfetchError):
    """A limiter (``rfetch.Limiter``) had no capacity within its ``wait_timeout``
    (Sidekiq Enterprise's ``Sidekiq::Limiter::OverLimit``).

    Raised by ``within_limit()``. Raised out of a job's ``perform``, the worker does not
    count it as a failure: it reschedules the job with the limiter's backoff, counting the
    reschedules in the payload's ``overrated`` field, up to the limiter's ``reschedule``
    maximum, after which it is a normal failure (docs/flow-control.md).

    Attributes:
        name: the limiter's name.
        kind: its kind (``window``, ``bucket``, ``leaky``, ``points``, ``concurrent``).
        waited: seconds ``within_limit`` waited before giving up.
        reschedule: how many times a job may be rescheduled for this limiter.
        backoff: the delay before reschedule number ``n`` (0-based), in seconds, given
            ``n`` and the job's payload; None for the default (Sidekiq Enterprise's
            ``300 * n + rand(300) + 1``).
    """

    def __init__(
        self,
        message: str,
        name: str,
        kind: str,
        waited: float,
        reschedule: int,
        backoff: Callable[[int, dict[str, Any]], float] | None = None,
    ) -> None:
        super().__init__(message)
        self.name = name
        self.kind = kind
        self.waited = waited
        self.reschedule = reschedule
        self.backoff = backoff

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.name, self.kind, self.waited, self.reschedule))


class LimiterKeyError(RfetchError):
    """A limiter's Redis key (or the registry set of limiter names) exists with another
    type: the message names the key; nothing was written."""


class CheckpointRefused(RfetchError):
    """A durable job's checkpoint (an iterable job's cursor, a step's result) was refused:
    the job is no longer in this process's private list, so another process owns it now
    (this one stalled past its heartbeat and the job was recovered). The job stops at once
    and this process leaves it alone: the owner goes on from its own checkpoint
    (docs/durable-jobs.md, "Fencing")."""


class JobInterrupted(RfetchError):
    """An iterable job stopped at an item boundary after checkpointing its cursor: its
    worker is going quiet (TSTP, TERM, a recycle) or its ``max_runtime`` ran out. The
    worker pushes it back uncounted; it resumes from its cursor. Raised by rfetch, never by
    application code."""


class StepError(RfetchError, ValueError):
    """A durable step (``self.step``) was misused: a name used twice in one execution, a
    name that is not a non-empty string, or a result that is not native JSON or too large
    to record."""


POISON_PILL_CLASS = "rfetch.PoisonPill"
"""The ``error_class`` of a job sent to the dead set as a poison pill (recovered from
``poison_max_recoveries`` workers that had started it): orphan recovery writes it, the dead
set and explain show it."""
