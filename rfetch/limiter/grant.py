"""What ``within_limit`` gives its block, who holds a lock, and how often a concurrent
limiter's waiters poll."""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass

POLL_FIRST = 0.02
"""Seconds between a concurrent limiter's first attempts while every lock is held; the
interval doubles up to :data:`POLL_CAP` (a release is seen within that)."""

POLL_CAP = 0.25
"""The longest interval between a concurrent limiter's attempts while it waits, seconds."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What ``within_limit`` gives the block.

    Attributes:
        name: the limiter's name.
        waited: seconds waited for capacity (monotonic clock).
        used: the limiter's use right after the grant (grants in the window, units in the
            bucket, locks held).
        redis_ms: Redis's clock at the grant, epoch milliseconds.
        sent_at: this host's clock (``time.time()``, epoch seconds) when the granted
            attempt was sent: the grant happened between it and the block's start.
        token: the lock's token (concurrent limiter), else None.
    """

    name: str
    waited: float
    used: int
    redis_ms: float
    sent_at: float
    token: str | None = None


def holder() -> str:
    """Who holds a lock: ``host:pid:thread``, as on the Limits page."""
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"
