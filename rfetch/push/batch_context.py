"""Which batch is open in this context: the ``jobs()`` block collecting pushes, and the
batch of the running job (the parent of a batch created inside it, as Sidekiq Pro).

Both are ``contextvars`` variables: each thread and each asyncio task sees its own, and a
worker runs every job in a copy of its thread's context, dropped at the end.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass, field

from rfetch.push.buffer import BufferedJob


@dataclass
class Collector:
    """The jobs pushed inside one ``jobs()`` block, held until the block ends.

    Attributes:
        bid: the batch the jobs join (written into each payload as ``bid``).
        jobs: the serialised jobs, in push order.
    """

    bid: str
    jobs: list[BufferedJob] = field(default_factory=list)

    def take(self, jobs: list[BufferedJob]) -> list[bool]:
        """Hold ``jobs``; each counts as accepted (a unique job's lock is decided when the
        block ends)."""
        self.jobs.extend(jobs)
        return [True] * len(jobs)


_COLLECTING: ContextVar[Collector | None] = ContextVar("rfetch_batch_collecting", default=None)
_RUNNING: ContextVar[str | None] = ContextVar("rfetch_batch_running", default=None)


def collecting() -> Collector | None:
    """The collector of the ``jobs()`` block open in this context, or None."""
    return _COLLECTING.get()


def open_block(collector: Collector) -> Token[Collector | None]:
    """Start collecting this context's pushes into ``collector``."""
    return _COLLECTING.set(collector)


def close_block(token: Token[Collector | None]) -> None:
    """Stop collecting (the token :func:`open_block` returned)."""
    _COLLECTING.reset(token)


def running_bid() -> str | None:
    """The bid of the batched job running in this context (a worker sets it), or None."""
    return _RUNNING.get()


def enter_job(bid: str | None) -> None:
    """Called by the worker as a job starts, in the job's own context."""
    _RUNNING.set(bid)
