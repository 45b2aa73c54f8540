"""Time limits and cancellation of one job execution.

A worker gives every job it runs a :class:`JobControl`: the job's deadline (from the job
option ``timeout``, else the worker's ``--job-timeout``) and its cancel flag (set when
``rfetch.api.cancel`` asks). The job sees them as ``self.deadline`` and
``self.check_cancelled()`` and can stop itself at a safe point: the cooperative path.

A job that does not stop is overdue ``grace`` seconds after its deadline or after the
cancel request; the worker then takes the hard path (docs/guarantees.md, "Time limits"):
it records the job as failed with :meth:`JobControl.error` (``rfetch.JobTimeout`` or
``rfetch.JobCancelled``), goes quiet, pushes back every other job it holds once its
other running jobs have finished (within ``-t``), and exits with ``EXIT_RETIRED`` so
that its supervisor (or systemd) replaces it. A Python thread cannot be stopped from
outside safely (Sidekiq says the same of Ruby threads), so the process is what ends.

Every time here is monotonic seconds (``time.monotonic``), never epoch.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from rfetch.errors import JobCancelled, JobTimeout

Verdict = Literal["timeout", "cancel"]
"""Why a job is overdue: past its deadline plus grace, or cancelled plus grace ago."""


def timeout_of(payload: Mapping[str, Any], default: float | None) -> float | None:
    """The time limit of a job in seconds: the payload's ``timeout`` field when it is a
    positive finite number, else ``default`` (the worker's ``--job-timeout``, or None).

    A ``timeout`` of another type (a payload pushed by hand or by another client) is not
    an error here: the job runs with the worker's default, as if the field were absent.
    """
    value = payload.get("timeout")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if value > 0 and math.isfinite(value):
        return float(value)
    return default


class JobControl:
    """The deadline and the cancel flag of one job execution.

    Thread-safe: the job's thread reads it while the worker's timekeeper cancels it.

    Args:
        timeout: seconds the job may run, or None for no limit.
        grace: seconds past the deadline, or past a cancel request, before the job is
            overdue and the worker stops it for real (``Config.job_timeout_grace``).
        started: when the job started, monotonic seconds (default: now).
        clock: the monotonic clock (tests pass a fake one).
        stopping: whether the worker is going quiet (TSTP, TERM, a recycle): an iterable
            job checkpoints and stops at its next item boundary (default: never).
    """

    def __init__(
        self,
        timeout: float | None,
        grace: float,
        started: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.clock = clock
        self.stopping = stopping
        self.timeout = timeout
        self.grace = grace
        self.started = clock() if started is None else started
        self.deadline: float | None = None if timeout is None else self.started + timeout
        """Monotonic time at which the job should stop itself, or None (no limit)."""
        self._lock = threading.Lock()
        self._cancelled_at: float | None = None
        self.cancel_reason = ""
        self.cancel_to_dead = False
        self._outcome: Literal["running", "finished", "abandoned"] = "running"

    def rearm(self) -> None:
        """Start the time limit again from now: an iterable job's ``timeout`` limits each
        item (a hard limit per iteration), not the whole walk."""
        if self.timeout is not None:
            self.deadline = self.clock() + self.timeout

    @property
    def abandoned(self) -> bool:
        """Whether the worker took the hard path: the job was recorded as failed (or
        cancelled) while its thread still ran; whatever the thread does later is ignored."""
        with self._lock:
            return self._outcome == "abandoned"

    def finish(self) -> bool:
        """Called by the job's thread when ``perform`` returned or raised: True if the
        thread still owns the outcome (acknowledge it, or record the failure); False if the
        hard path took the job over first."""
        with self._lock:
            if self._outcome == "abandoned":
                return False
            self._outcome = "finished"
            return True

    def abandon(self) -> bool:
        """Called by the worker's timekeeper to take the hard path: True if it took the job
        over (the thread had not finished), False if the thread finished first. Exactly one
        of :meth:`finish` and :meth:`abandon` returns True, so a job is never both
        acknowledged and recorded as timed out."""
        with self._lock:
            if self._outcome == "finished":
                return False
            self._outcome = "abandoned"
            return True

    @property
    def cancelled(self) -> bool:
        """Whether a cancel was requested."""
        return self._cancelled_at is not None

    def cancel(self, reason: str = "", dead: bool = False) -> None:
        """Request the cancel (the first request's time starts the grace period).

        Args:
            reason: shown in the error message and to the death handlers.
            dead: put the cancelled job in the dead set (default: drop it).
        """
        with self._lock:
            if self._cancelled_at is not None:
                return
            self.cancel_reason = reason
            self.cancel_to_dead = dead
            self._cancelled_at = self.clock()  # last: readers see reason and dead first

    def check(self) -> None:
        """Stop here if the job should stop (what ``Job.check_cancelled`` calls).

        Raises:
            JobCancelled: a cancel was requested.
            JobTimeout: the deadline has passed.
        """
        if self._cancelled_at is not None:
            raise self.error("cancel")
        if self.deadline is not None and self.clock() >= self.deadline:
            raise self.error("timeout")

    def overdue(self, now: float | None = None) -> Verdict | None:
        """Whether the hard path is due at ``now`` (monotonic; default the clock): a cancel
        requested ``grace`` seconds ago or more, else a deadline ``grace`` seconds past."""
        now = self.clock() if now is None else now
        with self._lock:
            cancelled_at = self._cancelled_at
        if cancelled_at is not None and now >= cancelled_at + self.grace:
            return "cancel"
        if self.deadline is not None and now >= self.deadline + self.grace:
            return "timeout"
        return None

    def next_due(self) -> float | None:
        """The monotonic time at which :meth:`overdue` turns true, or None if never (no
        deadline and no cancel)."""
        with self._lock:
            cancelled_at = self._cancelled_at
        times = [t + self.grace for t in (cancelled_at, self.deadline) if t is not None]
        return min(times) if times else None

    def error(self, verdict: Verdict) -> JobTimeout | JobCancelled:
        """The exception recorded for this job, with a message a person can act on."""
        if verdict == "cancel":
            why = f": {self.cancel_reason}" if self.cancel_reason else ""
            return JobCancelled(f"cancelled{why}")
        return JobTimeout(f"ran longer than its time limit of {self.timeout:g} s")


CANCEL_TTL = 24 * 3600
"""Seconds a cancel mark ``cancel:<jid>`` lives: any worker that holds or fetches the job
within that time cancels it."""


def cancel_mark(reason: str, dead: bool, now: float) -> str:
    """The value of a cancel mark (JSON): why, whether the job goes to the dead set, and
    when it was asked (float epoch seconds)."""
    return json.dumps({"reason": reason, "dead": dead, "at": now}, separators=(",", ":"))


def read_cancel_mark(raw: bytes | str) -> tuple[str, bool]:
    """``(reason, dead)`` of a cancel mark; a mark that is not rfetch's JSON still cancels
    (reason ``""``, not to the dead set), since someone asked for it."""
    try:
        mark = json.loads(raw)
    except (TypeError, ValueError):
        return "", False
    if not isinstance(mark, dict):
        return "", False
    reason = mark.get("reason")
    return (reason if isinstance(reason, str) else ""), mark.get("dead") is True
