"""What a worker process can run at once, and what it runs now, counted by kind.

A process runs sync jobs on ``concurrency`` processor threads and async jobs on the
``async_concurrency`` slots of its event loop (only when its classes include async ones).
Every figure it publishes counts both the same way, as Sidekiq 7+ counts its capsules:

* ``concurrency`` (the heartbeat's ``info`` and hash field, the process title's
  ``[x of y busy]``) is the total capacity, threads plus loop slots, as Sidekiq's
  ``total_concurrency`` is the sum over capsules;
* ``busy`` is every job running, on a thread or a slot: so busy / concurrency, the
  utilisation Sidekiq Web shows, never exceeds 100 %;
* the split is published too: ``info.capsules`` (Sidekiq 8's form: ``default`` for the
  threads, ``async`` for the loop's slots) and the hash fields ``busy_threads`` and
  ``busy_async``, which rfetch's Busy page and the Prometheus gauges read.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rfetch.config import Config

DEFAULT_CAPSULE = "default"
"""The capsule of the processor threads (Sidekiq's name for its only capsule by default)."""

ASYNC_CAPSULE = "async"
"""The capsule of the event loop's slots."""


class Busy(NamedTuple):
    """Jobs running now, by kind.

    Attributes:
        threads: on processor threads (sync jobs).
        async_slots: on event-loop slots (async jobs).
    """

    threads: int
    async_slots: int

    @property
    def total(self) -> int:
        """Every job running (Sidekiq's ``busy``)."""
        return self.threads + self.async_slots


class Capacity(NamedTuple):
    """Jobs a process can run at once, by kind.

    Attributes:
        threads: processor threads (``concurrency``).
        async_slots: event-loop slots (``async_concurrency``; 0 when no class is async and
            the process runs no loop).
    """

    threads: int
    async_slots: int

    @property
    def total(self) -> int:
        """Threads plus loop slots (Sidekiq's ``concurrency``, its ``total_concurrency``)."""
        return self.threads + self.async_slots

    def capsules(self, config: Config) -> dict[str, dict[str, Any]]:
        """The ``capsules`` of the heartbeat's ``info`` (Sidekiq 8.0.9+'s form: name ->
        ``{concurrency, mode, weights}``): the threads' capsule, and the loop's when it has
        slots; both fetch from every queue of ``config`` with its weight."""
        mode = "strict" if config.is_strict else "weighted"
        weights = {q.name: q.weight for q in config.queues}
        found = {DEFAULT_CAPSULE: {"concurrency": self.threads, "mode": mode,
                                   "weights": weights}}
        if self.async_slots:
            found[ASYNC_CAPSULE] = {"concurrency": self.async_slots, "mode": mode,
                                    "weights": weights}
        return found

    def title(self, busy: Busy) -> str:
        """The process title's ``[x of y busy]`` (Sidekiq's), x and y counting both kinds."""
        return f"[{busy.total} of {self.total} busy]"


def capsule_concurrency(info: dict[str, Any], name: str) -> int | None:
    """The ``concurrency`` of capsule ``name`` in a heartbeat's ``info``, or None when the
    process wrote no such capsule (Sidekiq before 8.0.9, rfetch before capsules, or no
    event loop)."""
    capsules = info.get("capsules")
    if not isinstance(capsules, dict):
        return None
    capsule = capsules.get(name)
    if not isinstance(capsule, dict):
        return None
    value = capsule.get("concurrency")
    return value if isinstance(value, int) and not isinstance(value, bool) else None
