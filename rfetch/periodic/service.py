"""The leader thread of a worker process: takes part in the election and, while this
process leads, runs the ticker.

It survives every exception through the shared :class:`~rfetch.guard.ThreadGuard`, like
every other long-lived thread: each kind of failure (a Redis outage, a reply error, a bug) is
logged and reported once per streak and retried with a back-off, while the lease's local view
runs out by itself. Quiet and TERM call :meth:`PeriodicService.step_down`, which gives the
lease up at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from redis import Redis

from rfetch.guard import ThreadGuard
from rfetch.periodic.lease import ELECTED, FOLLOWER, LeaderLease
from rfetch.periodic.ticker import LeadershipLost, Ticker

log = logging.getLogger("rfetch.periodic")

TICK_SLACK = 0.005
"""Seconds waited past a tick's time before pushing it, so that Redis's clock has
reached it."""

BACKOFF_START, BACKOFF_MAX = 0.5, 5.0
"""Seconds between attempts after a failure (doubling), for :func:`leader_guard`."""

Reporter = Callable[[BaseException, dict[str, Any]], None]


class PeriodicService:
    """One process's election loop and, while it leads, its ticker.

    Args:
        lease: this process's lease.
        ticker: pushes the schedules' ticks; None when the worker registers no schedule
            (the process still takes part, for :func:`rfetch.is_leader`, and leaves the
            schedules stored in Redis alone).
        guard: the failure policy of the loop (:func:`leader_guard`).
    """

    def __init__(self, lease: LeaderLease, ticker: Ticker | None, guard: ThreadGuard) -> None:
        self.lease = lease
        self.ticker = ticker
        self.guard = guard

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set or :meth:`step_down` is called."""
        while not stop.is_set() and not self.lease.stopped:
            try:
                wait = self.step()
            except LeadershipLost as exc:
                log.warning("leadership lost: %s", exc)
                self._forget()
                continue
            except Exception as exc:  # any failure: the thread goes on (ThreadGuard)
                stop.wait(self.guard.failed(exc))
                continue
            self.guard.succeeded()
            self._pause(wait, stop)

    def step(self) -> float:
        """Claim if due, push due ticks if leading; returns seconds to wait.

        Raises:
            LeadershipLost: a push or sync found the lease taken.
            redis.exceptions.RedisError: Redis unreachable.
        """
        lease = self.lease
        was_leader = lease.is_leader
        if lease.claim_due():
            claim = lease.claim()
            if claim is None:
                return 0.0
            if claim.status == ELECTED:
                log.info("this process leads now (leader_ttl %.1f s)", lease.ttl)
                self._reset_ticker()
            elif claim.status == FOLLOWER and was_leader:
                log.warning("leadership taken by %s", claim.holder)
        if not lease.is_leader:
            self._reset_ticker()
            return lease.seconds_to_claim()
        wait = lease.seconds_to_claim()
        if self.ticker is None:
            return wait
        if not self.ticker.synced:
            self.ticker.sync(lease.token, lease.redis_now())
        wake = self.ticker.run_due(lease.token, lease.redis_now())
        if wake is not None:
            wait = min(wait, max(0.0, wake - lease.redis_now()) + TICK_SLACK)
        return wait

    def step_down(self) -> None:
        """Leave the election now (quiet, TERM): give the lease up if held, so another
        process takes over at once. Never raises: when Redis cannot be reached the lease
        runs out by itself within ``leader_ttl``."""
        try:
            if self.lease.step_down():
                log.info("stepped down as leader")
        except Exception as exc:
            log.error("could not step down as leader (the lease will run out): %s", exc)

    def _pause(self, seconds: float, stop: threading.Event) -> None:
        if self.lease.is_leader or self.lease.stopped:
            stop.wait(seconds)
        elif not stop.is_set():
            self.lease.wait_as_follower(seconds)

    def _forget(self) -> None:
        self.lease.lost()
        self._reset_ticker()

    def _reset_ticker(self) -> None:
        if self.ticker is not None:
            self.ticker.reset()


def leader_guard(report: Reporter | None, redis: Redis | None = None) -> ThreadGuard:
    """The failure policy of the leader thread: the shared :class:`ThreadGuard`, named
    ``leader election``, backing off from :data:`BACKOFF_START` to :data:`BACKOFF_MAX`
    seconds.

    Args:
        report: calls the error handlers (once per kind of failure per streak); None for
            none.
        redis: the client whose idle connections are dropped on a ``READONLY`` reply.
    """
    return ThreadGuard("leader election", log, report, redis, BACKOFF_START, BACKOFF_MAX)
