"""Keeping a long-lived thread alive through any exception.

Every background thread of rfetch (heartbeat, scheduled poller, orphan recovery, pause
watcher, fetcher, timekeeper, leader election, push-buffer delivery, log writer) runs a loop
that must outlive every error: a connection error, a reply error (``OOM`` when Redis
reaches ``maxmemory``, ``WRONGTYPE``, ``READONLY`` after a failover) or a bug. A
:class:`ThreadGuard` is the one policy they share:

* each kind of failure is logged once per streak of failures (the first one with its
  traceback when it is not a Redis error), and reported to the error handlers once;
* the caller backs off: the wait doubles from ``first`` to ``cap`` seconds;
* the first success after a streak is logged once, with how long it lasted;
* a ``READONLY``, ``NOREPLICAS`` or ``UNBLOCKED`` reply closes the idle connections of the
  client, so the next command connects again and reaches the new primary behind the same
  address (Sidekiq #2550, #4495, #4985 handle these replies the same way).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from redis import Redis
from redis.exceptions import RedisError, ResponseError

from rfetch.store.connection import REDIS_DOWN

Reporter = Callable[[BaseException, dict[str, Any]], None]

RECONNECT_REPLIES = ("READONLY", "NOREPLICAS", "UNBLOCKED")
"""Reply errors that mean this connection reaches the wrong server (a demoted primary) or
was kicked out of a blocking command: the connection is dropped, not reused."""


def reply_code(exc: BaseException) -> str | None:
    """The error code of a Redis reply error (``OOM``, ``WRONGTYPE``, ``READONLY``...), or
    None. redis-py strips known codes from the message into ``status_code``."""
    if not isinstance(exc, ResponseError):
        return None
    code = getattr(exc, "status_code", None)
    if isinstance(code, str) and code:
        return code
    first = str(exc).split(maxsplit=1)[:1]
    return first[0] if first and first[0].isupper() else None


def failure_kind(exc: BaseException) -> str:
    """A short name for a kind of failure: ``unreachable`` for every connection error, the
    exception class otherwise, with the reply's error code for a Redis reply error
    (``OutOfMemoryError OOM``, ``ResponseError WRONGTYPE``, ``ReadOnlyError READONLY``)."""
    if isinstance(exc, REDIS_DOWN):
        return "unreachable"
    code = reply_code(exc)
    return f"{type(exc).__name__} {code}" if code else type(exc).__name__


def _reply_text(exc: BaseException) -> str:
    text = str(exc)
    code = reply_code(exc)
    return text if code is None or text.startswith(code) else f"{code} {text}"


class ThreadGuard:
    """Failure policy of one long-lived thread.

    Args:
        name: what the thread does, for the log lines (``"heartbeat"``, ``"fetch"``...).
        logger: where the lines go.
        report: the error reporter (``ErrorReporter``), called once per kind of failure
            that is not a connection error; None for none.
        redis: the client whose idle connections are closed on a ``READONLY`` reply.
        first: seconds to wait after the first failure of a streak.
        cap: the longest wait, seconds.
        clock: monotonic clock, seconds (for tests).
    """

    def __init__(
        self,
        name: str,
        logger: logging.Logger,
        report: Reporter | None = None,
        redis: Redis | None = None,
        first: float = 0.1,
        cap: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if first <= 0 or cap < first:
            raise ValueError("ThreadGuard needs 0 < first <= cap")
        self.name = name
        self.log = logger
        self.report = report
        self.redis = redis
        self.first = first
        self.cap = cap
        self.clock = clock
        self._seen: set[str] = set()
        self._failures = 0
        self._since: float | None = None

    @property
    def failing(self) -> bool:
        """Whether the last attempt failed."""
        return self._failures > 0

    def failed(self, exc: BaseException) -> float:
        """Record a failure; returns the seconds to wait before the next attempt.

        Never raises: a failure of the error reporter itself is logged and dropped.
        """
        self._failures += 1
        if self._since is None:
            self._since = self.clock()
        kind = failure_kind(exc)
        if kind not in self._seen:
            self._seen.add(kind)
            self._log_first(kind, exc)
        else:
            self.log.debug("%s failed again (%s): %s", self.name, kind, exc)
        if reply_code(exc) in RECONNECT_REPLIES:
            self._reconnect()
        return min(self.cap, self.first * 2.0 ** min(self._failures - 1, 32))

    def succeeded(self) -> None:
        """Record a success: log the end of a streak of failures, reset the back-off."""
        if self._failures:
            lasted = self.clock() - (self._since or self.clock())
            self.log.info(
                "%s recovered after %d failure(s) over %.1f s", self.name, self._failures, lasted
            )
        self._failures = 0
        self._since = None
        self._seen.clear()

    def _log_first(self, kind: str, exc: BaseException) -> None:
        if isinstance(exc, REDIS_DOWN):
            self.log.error("%s failed, Redis unreachable (%s); retrying", self.name, exc)
            return
        if isinstance(exc, RedisError):
            self.log.error("%s failed, Redis replied %s; retrying", self.name, _reply_text(exc))
        else:
            self.log.error(
                "%s failed (%s); retrying", self.name, kind, exc_info=(type(exc), exc,
                                                                       exc.__traceback__)
            )
        if self.report is None:
            return
        try:
            self.report(exc, {"context": self.name})
        except Exception as report_exc:  # an error handler's bug must not end the thread
            self.log.error("error handler raised %r", report_exc)

    def _reconnect(self) -> None:
        if self.redis is None:
            return
        try:
            self.redis.connection_pool.disconnect(inuse_connections=False)
        except Exception as exc:
            self.log.debug("closing the connections failed: %r", exc)
