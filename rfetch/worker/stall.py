"""A job fetched before a stall must not start once its process has been taken for dead.

A process stalled longer than its heartbeat TTL (SIGSTOP, a VM pause, swap, a debugger, a
long C call holding the GIL) looks dead: orphan recovery pushes its private lists back and
another process runs those jobs. When it resumes, the jobs it had fetched but not started
are no longer its own. Such a stall shows as a long wait between the sending of a job's
fetch and its start (both on the monotonic clock, which goes on during SIGSTOP), so only a
job that waited that long is checked, with one LPOS, before it starts: the common path
costs nothing.
"""

from __future__ import annotations

import logging

from rfetch.config import Config
from rfetch.errors import InvalidJob
from rfetch.jobs.payload import describe, loads
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.manager")


def jid_of(unit: UnitOfWork) -> str:
    """The jid of a fetched job, for log lines (its start when it has none)."""
    if unit.jid:
        return unit.jid
    try:
        return str(loads(unit.raw)["jid"])
    except InvalidJob:
        return describe(unit.raw)


class StallGuard:
    """Decides whether a fetched job may start.

    Args:
        config: ``heartbeat_interval``, ``heartbeat_ttl`` and ``block_timeout`` (seconds).
        fetch: the reliable fetch, which checks that a job is still in its private list.
    """

    def __init__(self, config: Config, fetch: ReliableFetch) -> None:
        self.fetch = fetch
        self.threshold = min(
            config.heartbeat_ttl / 2, max(config.heartbeat_interval, config.block_timeout)
        )
        """Seconds a job may wait between the sending of its fetch and its start without a
        check: longer than a blocking fetch and than the heartbeat interval, shorter than
        a stall that lets the heartbeat expire."""

    def fresh(self, waited: float) -> bool:
        """Whether a job that waited ``waited`` seconds (monotonic) may start unchecked."""
        return waited < self.threshold

    def lost(self, unit: UnitOfWork, waited: float) -> bool:
        """Whether ``unit``, which waited ``waited`` seconds, is no longer this process's
        (one LPOS, retried until Redis answers); logs the jid of a lost job, which must
        not start here."""
        if self.fetch.holds(unit):
            return False
        log.warning(
            "dropped job %s fetched %.1f s ago: no longer in this process's private list "
            "(recovered as an orphan while this process was stalled past its heartbeat "
            "TTL); it is not run here",
            jid_of(unit),
            waited,
        )
        return True
