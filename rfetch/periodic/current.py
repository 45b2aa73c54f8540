"""This process's lease, for :func:`rfetch.is_leader` (Sidekiq Enterprise's ``leader?``).

The worker's launcher sets it when it starts its leader thread and clears it when it stops;
a process that runs no worker is never leader.
"""

from __future__ import annotations

import threading

from rfetch.periodic.lease import LeaderLease


class CurrentLease:
    """Holds the lease of the worker running in this process, if any."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lease: LeaderLease | None = None

    def set(self, lease: LeaderLease | None) -> None:
        """Set (or clear, with None) the process's lease."""
        with self._lock:
            self._lease = lease

    def is_leader(self) -> bool:
        """Whether this process currently leads."""
        with self._lock:
            lease = self._lease
        return lease is not None and lease.is_leader


CURRENT = CurrentLease()


def is_leader() -> bool:
    """Whether this worker process is the cluster's leader now (one per Redis and
    namespace), for once-per-cluster work of your own (Sidekiq Enterprise's ``leader?``).

    False outside a worker, and from the moment the worker is quieted or stopped. The
    answer is conservative: it turns False a ``leader_ttl`` after the last renewal this
    process sent, before Redis would let another process take over.
    """
    return CURRENT.is_leader()
