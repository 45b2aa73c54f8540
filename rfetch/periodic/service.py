"""The leader thread of a worker process: takes part in the election and, while this
process leads, runs the ticker.

It survives every exception: a Redis outage is logged once and retried with backoff (the
lease's local view runs out by itself), anything else is logged and reported to the error
handlers. Quiet and TERM call :meth:`PeriodicService.step_down`, which gives the lease up at
once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from rfetch.periodic.lease import ELECTED, FOLLOWER, LeaderLease
from rfetch.periodic.ticker import LeadershipLost, Ticker
from rfetch.store.connection import REDIS_DOWN

log = logging.getLogger("rfetch.periodic")

TICK_SLACK = 0.005
"""Seconds waited past a tick's time before pushing it, so that Redis's clock has
reached it."""

BACKOFF_START, BACKOFF_MAX = 0.5, 5.0
"""Seconds between attempts while Redis is unreachable (doubling)."""

Reporter = Callable[[BaseException, dict[str, Any]], None]


class PeriodicService:
    """One process's election loop and, while it leads, its ticker.

    Args:
        lease: this process's lease.
        ticker: pushes the schedules' ticks; None when the worker registers no schedule
            (the process still takes part, for :func:`rfetch.is_leader`, and leaves the
            schedules stored in Redis alone).
        report: calls the error handlers.
    """

    def __init__(self, lease: LeaderLease, ticker: Ticker | None, report: Reporter) -> None:
        self.lease = lease
        self.ticker = ticker
        self.report = report
        self._failing = False
        self._delay = BACKOFF_START

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set or :meth:`step_down` is called."""
        while not stop.is_set() and not self.lease.stopped:
            try:
                self._pause(self.step(), stop)
                if self._failing:
                    log.info("leader election: Redis reachable again")
                    self._failing = False
                self._delay = BACKOFF_START
            except LeadershipLost as exc:
                log.warning("leadership lost: %s", exc)
                self._forget()
            except REDIS_DOWN as exc:
                if not self._failing:
                    log.error("leader election: Redis unreachable: %s", exc)
                    self._failing = True
                stop.wait(self._delay)
                self._delay = min(self._delay * 2, BACKOFF_MAX)
            except Exception as exc:
                log.exception("leader election failed")
                self.report(exc, {"context": "periodic"})
                stop.wait(self._delay)
                self._delay = min(self._delay * 2, BACKOFF_MAX)

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
