"""One execution of an iterable job: load its state, walk its enumerator from the cursor,
checkpoint (fenced) every ``checkpoint_interval`` seconds or ``checkpoint_every`` items, and
stop at an item boundary when the worker goes quiet, ``max_runtime`` runs out or the job is
cancelled (Sidekiq 7.3's ``IterableJob#perform``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from rfetch.durable.checkpoint import Hold, IterationState, now
from rfetch.durable.progress import Progress
from rfetch.durable.steps import StepBook
from rfetch.errors import CheckpointRefused, JobCancelled, JobInterrupted
from rfetch.jobs.job_control import JobControl
from rfetch.store.connection import REDIS_DOWN

if TYPE_CHECKING:
    from rfetch.durable.iterable import IterableJob

log = logging.getLogger("rfetch.iteration")

PROGRESS_EVERY = 1.0
"""Seconds between two progress reports at most (one at a checkpoint: a report costs a
round trip, so a per-item checkpoint does not report per item)."""


class IterationRun:
    """The loop of one execution of ``job``.

    Args:
        job: the iterable job instance.
        args: its arguments.
        hold: its hold on ``it-<jid>`` (None outside a worker: nothing is kept).
        control: its time limit, cancel flag and the worker's quiet flag (None outside a
            worker).
        wrapped: whether the job's class overrides ``around_iteration`` (else items are
            called directly: one call less per item); the job says so, as this module is
            below :mod:`rfetch.durable.iterable`.
    """

    def __init__(self, job: IterableJob, args: Sequence[Any], hold: Hold | None,
                 control: JobControl | None, *, wrapped: bool = True) -> None:
        self.job, self.args, self.hold, self.control = job, list(args), hold, control
        self.wrapped = wrapped
        self.state = hold.load_iteration() if hold is not None else IterationState()
        self.started = time.monotonic()
        self.base_runtime = self.state.runtime
        self.last_flush = self.started
        self.since_flush = 0
        self.done = 0
        """Items done in this execution."""
        self.book = StepBook(hold, job.jid)
        self.progress = Progress(job.total(*self.args))
        self.last_progress = self.started
        job._steps = self.book  # a step inside an item belongs to the item

    def run(self) -> None:
        """Run the execution to its end.

        Raises:
            JobInterrupted: stopped at an item boundary, cursor saved (push it back).
            JobCancelled: cancelled, honoured at an item boundary.
            CheckpointRefused: another process owns the job now.
            Exception: whatever an item or the enumerator raised, after the cursor of the
                last item done was saved (the retry resumes from there).
        """
        job, state = self.job, self.state
        state.executions += 1
        if state.executions > 1 and state.cursor is not None:
            job.on_resume()
        else:
            job.on_start()
        try:
            self._loop(job.build_enumerator(*self.args, cursor=state.cursor))
        except (JobInterrupted, JobCancelled, CheckpointRefused):
            job.on_stop()
            raise
        except BaseException as exc:
            self._save_after_failure(exc)
            job.on_stop()
            raise
        job.on_stop()
        job.on_complete()
        if self.hold is not None:
            self.hold.finish_iteration(steps=self.book.used)

    def _loop(self, enumerator: Iterable[Any]) -> None:
        job, state, control, book, args = self.job, self.state, self.control, self.book, self.args
        interval, every = job.checkpoint_interval, job.checkpoint_every
        each, wrapped = job.each_iteration, self.wrapped
        book.scoped = True  # a step inside an item belongs to the item
        clock = time.monotonic
        for pair in enumerator:
            self._boundary()
            if type(pair) is not tuple or len(pair) != 2:
                _pair(pair)
            item, cursor = pair
            if control is not None:
                control.rearm()  # the job's timeout limits each item (hard per iteration)
            book.scope = cursor
            if wrapped:
                job.around_iteration(partial(each, item, *args))
            else:
                each(item, *args)
            if book.item_names:
                book.item_done()
            state.cursor = cursor
            state.done += 1
            self.done += 1
            self.since_flush += 1
            if (every is not None and self.since_flush >= every) or (
                clock() - self.last_flush >= interval
            ):
                self.flush()

    def _boundary(self) -> None:
        """Between two items: honour a cancel, the worker going quiet, ``max_runtime``."""
        control, job = self.control, self.job
        if job.cancel_requested or self.state.cancelled is not None or (
            control is not None and control.cancelled
        ):
            self._cancel()
        if control is not None and control.stopping():
            self._interrupt("the worker is going quiet (TSTP, TERM or a recycle)")
        limit = job.max_runtime
        if limit is not None and time.monotonic() - self.started >= limit:
            self._interrupt(f"max_runtime of {limit:g} s reached")

    def _interrupt(self, why: str) -> None:
        self.flush()
        raise JobInterrupted(f"interrupted after {self.done} item(s): {why}; resumes at "
                             f"cursor {self.state.cursor!r}")

    def _cancel(self) -> None:
        if self.state.cancelled is None:
            self.state.cancelled = now()
        self.flush()
        self.job.on_cancel()
        reason = self.control.cancel_reason if self.control is not None else ""
        raise JobCancelled(f"cancelled{': ' + reason if reason else ''} at cursor "
                           f"{self.state.cursor!r}")

    def flush(self) -> None:
        """Checkpoint the state now (fenced); learn whether the job was cancelled.

        Raises:
            CheckpointRefused: another process owns the job now.
        """
        clock = time.monotonic()
        self.last_flush, self.since_flush = clock, 0
        if self.hold is None:
            return
        self.state.runtime = self.base_runtime + (clock - self.started)
        written = self.hold.save_iteration(self.state, self.book.take_done())
        if written.cancelled is not None:
            self.state.cancelled = written.cancelled
        if clock - self.last_progress >= PROGRESS_EVERY:
            self.last_progress = clock
            self.progress.report(self.job, self.state.done, clock - self.started, self.done)

    def _save_after_failure(self, exc: BaseException) -> None:
        """Save the cursor of the last item done, so the retry resumes at the failing item
        (not from the start)."""
        try:
            self.flush()
        except CheckpointRefused as refused:
            raise refused from exc
        except REDIS_DOWN as error:
            log.error("could not save jid=%s's cursor after its failure (%s); the retry "
                      "resumes at the last checkpoint", self.job.jid, error)


def _pair(pair: Any) -> tuple[Any, Any]:
    """``(item, cursor)`` from what an enumerator yielded.

    Raises:
        TypeError: it is not a pair.
    """
    if not isinstance(pair, tuple) or len(pair) != 2:
        raise TypeError(
            f"build_enumerator must yield (item, cursor) pairs, got {pair!r} (use the "
            "enumerators of rfetch.durable.enumerators, or yield item, cursor)"
        )
    return pair[0], pair[1]
