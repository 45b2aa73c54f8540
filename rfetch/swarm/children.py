"""The supervisor's book of its children: one record per live worker process.

A swarm has ``processes`` slots. Each slot has at most one *active* child (the one counted
as capacity) and, while it is being replaced, one or more *retiring* children (quiet,
pushing back, on their way out). Every time here is monotonic seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass
class Child:
    """One forked worker process.

    Attributes:
        slot: the slot it fills (0-based).
        pid: its process id.
        identity: its worker identity ``host:pid:hex`` (its private lists are
            ``queue:sq|<identity>|<q>``).
        started: when it was forked, monotonic seconds.
        ready: it said ``ready`` (beat once, fetching).
        jobs: jobs it reported having run.
        retiring: why it is leaving (``"rolling restart"``, ``"max-memory"``, ...) once it
            was told to, or said it would; None while it is the slot's active child.
        term_at: when it was sent TERM (or said it was retiring), monotonic seconds; a
            second TERM would make it stop at once, so it is sent only once.
        killed: it outlived its TERM by too long and was sent KILL.
    """

    slot: int
    pid: int
    identity: str
    started: float
    ready: bool = False
    jobs: int = 0
    retiring: str | None = None
    term_at: float | None = None
    killed: bool = False

    @property
    def working(self) -> bool:
        """Whether it counts as capacity: ready and not leaving."""
        return self.ready and self.retiring is None


class ChildTable:
    """The live children by pid, with the per-slot views the supervisor needs."""

    def __init__(self) -> None:
        self._by_pid: dict[int, Child] = {}

    def __iter__(self) -> Iterator[Child]:
        return iter(list(self._by_pid.values()))

    def __len__(self) -> int:
        return len(self._by_pid)

    def add(self, child: Child) -> None:
        """Record a freshly forked child."""
        self._by_pid[child.pid] = child

    def get(self, pid: int) -> Child | None:
        """The child with this pid, or None (not ours, or already reaped)."""
        return self._by_pid.get(pid)

    def pop(self, pid: int) -> Child | None:
        """Forget a child that was reaped; None if it was not ours."""
        return self._by_pid.pop(pid, None)

    def active(self, slot: int) -> Child | None:
        """The slot's active child (not retiring), or None."""
        for child in self._by_pid.values():
            if child.slot == slot and child.retiring is None:
                return child
        return None

    def retiring_in(self, slot: int) -> list[Child]:
        """The slot's children on their way out."""
        return [c for c in self._by_pid.values() if c.slot == slot and c.retiring is not None]

    def working(self) -> int:
        """Children counted as capacity (ready, not retiring)."""
        return sum(1 for c in self._by_pid.values() if c.working)
