"""The supervisor's decisions that need no process: restart delays and recycling.

Pure functions of what the supervisor knows (times are monotonic seconds), so they are
tested with a fake clock.
"""

from __future__ import annotations

from rfetch.swarm.children import Child

STABLE_AFTER = 5.0
"""Seconds a child must have lived, and said ``ready``, for its death not to count as a
failure at start."""

MAX_RESTART_DELAY = 30.0
"""Longest wait before starting a child again in a slot whose children keep dying at start."""


class RestartBackoff:
    """How long to wait before replacing a child that died unexpectedly.

    A child that had been running (ready, and alive for ``stable_after`` seconds) is
    replaced at once. One that dies at start (before ``ready``, or sooner) is replaced at
    once the first time, then after 1, 2, 4, ... seconds, up to ``cap``, for as long as
    the slot's children keep dying at start, so a broken deploy or an unreachable Redis
    does not fork hundreds of processes a second.

    Args:
        stable_after: see :data:`STABLE_AFTER`.
        cap: see :data:`MAX_RESTART_DELAY`.
    """

    def __init__(self, stable_after: float = STABLE_AFTER, cap: float = MAX_RESTART_DELAY) -> None:
        self.stable_after = stable_after
        self.cap = cap
        self._failures: dict[int, int] = {}

    def delay(self, child: Child, died: float) -> float:
        """Seconds to wait before starting the slot's next child.

        Args:
            child: the child that died.
            died: when it was reaped, monotonic seconds.
        """
        if child.ready and died - child.started >= self.stable_after:
            self._failures[child.slot] = 0
            return 0.0
        failures = self._failures.get(child.slot, 0) + 1
        self._failures[child.slot] = failures
        if failures == 1:
            return 0.0
        return float(min(self.cap, 2 ** (failures - 2)))

    def failures(self, slot: int) -> int:
        """Deaths at start in a row for ``slot``."""
        return self._failures.get(slot, 0)


def recycle_reason(
    child: Child, rss_mb: float | None, max_memory: int | None, max_jobs: int | None
) -> str | None:
    """Why ``child`` should be recycled now, or None.

    Args:
        child: an active, ready child.
        rss_mb: its resident memory in MiB (None when unknown).
        max_memory: ``--max-memory`` in MiB, or None.
        max_jobs: ``--max-jobs``, or None.
    """
    if max_memory is not None and rss_mb is not None and rss_mb > max_memory:
        return f"max-memory ({rss_mb:.0f} MB > {max_memory} MB)"
    if max_jobs is not None and child.jobs >= max_jobs:
        return f"max-jobs ({child.jobs} >= {max_jobs})"
    return None
