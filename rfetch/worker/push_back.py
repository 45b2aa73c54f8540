"""Pushing back the jobs a worker process no longer holds, and the sweep of strays.

A job the manager takes out of ``HandOff.held`` without running it (quiet, a paused queue,
given back from behind long jobs, fetched while going quiet) is pushed back to the head of
its queue. When that fails, or when jobs may sit in the private lists held by no thread (a
reply lost to a connection error, a job rfetch failed on), the fetcher is asked to sweep:
in its next round it pushes back every job of the private lists that no thread holds
(``ReliableFetch.requeue_unheld``), retried until Redis answers.
"""

from __future__ import annotations

import logging

from rfetch.store.connection import REDIS_DOWN
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.handoff import HandOff
from rfetch.worker.reporting import ErrorReporter
from rfetch.worker.started import StartMarks
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.manager")


class PushBack:
    """The push-back and stray-sweep state of one manager; hold ``pool.cond`` around
    every use of its attributes.

    Args:
        fetch: the reliable fetch of this process.
        pool: the manager's held jobs and hand-off queue (its ``cond`` is the lock).
        report: the error reporter, for a push-back that failed for another reason than
            Redis being unreachable.
        marks: the process's start marks (a job its fetch marked is unmarked when pushed
            back unstarted).
    """

    def __init__(
        self, fetch: ReliableFetch, pool: HandOff, report: ErrorReporter, marks: StartMarks
    ) -> None:
        self.fetch = fetch
        self.marks = marks
        self.pool = pool
        self.report = report
        self.stuck: dict[int, UnitOfWork] = {}
        """Jobs rfetch failed on and could not push back: left in the private lists."""
        self.sweep: str | None = None
        """Why stray jobs may sit in the private lists (pushed back by the fetcher's next
        round); set by :meth:`ask_sweep`."""
        self.sweep_asks = 0
        """Sweeps asked for so far; :attr:`sweep_seen` is the count the fetcher's current
        round saw, so that a sweep asked for during a sweep is not cleared by it."""
        self.sweep_seen = 0

    def ask_sweep(self, why: str) -> None:
        """Have the fetcher push back, in its next round, the jobs of this process's private
        lists that no thread holds (``why``: for the log line). Hold ``pool.cond``."""
        self.sweep = why
        self.sweep_asks += 1
        self.pool.cond.notify_all()

    def swept(self, why: str, held: list[UnitOfWork]) -> None:
        """Sweep now (on the fetcher thread): push back the jobs of the private lists not
        in ``held``; clear the request unless another sweep was asked for meanwhile.

        Raises:
            Exception: what ``ReliableFetch.requeue_unheld`` raised (the request stays).
        """
        self.fetch.requeue_unheld(held, why)
        with self.pool.cond:
            if self.sweep_asks == self.sweep_seen:  # none asked meanwhile
                self.sweep = None

    def requeue(self, units: list[UnitOfWork], why: str) -> None:
        """Push back jobs this process no longer holds (taken out of ``pool.held``).

        If the push-back fails, the jobs stay in the private list held by no thread, and
        this process's heartbeat keeps orphan recovery away from them: the fetcher is told
        to sweep the private lists (:meth:`ReliableFetch.requeue_unheld`), retried until
        Redis answers. Without the sweep, the Sentinel chaos test lost the jobs given back
        from behind threads stuck on their acknowledgements just after the master's
        SIGKILL. Never raises: on the fetcher thread (a give-back) an error must not end it.
        The start marks their fetch wrote (jobs handed to threads idle then) are deleted
        first: they never started.
        """
        self.marks.unstarted(units)
        try:
            pushed = self.fetch.requeue(units)
            log.info("pushed back %d job(s) not started (%s)", pushed, why)
        except Exception as exc:
            with self.pool.cond:
                self.ask_sweep("a push-back that failed")
            log.error(
                "could not push back %d job(s) (%s): %s; they are pushed back from the "
                "private list once Redis answers",
                len(units),
                why,
                exc,
            )
            if not isinstance(exc, REDIS_DOWN):
                self.report(exc, {"context": "push back"})
