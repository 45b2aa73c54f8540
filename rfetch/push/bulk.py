"""One ``push_bulk`` call cut into atomic writes, for the sync and the asyncio client.

A bulk push is all or none (each write is one ``push.lua`` call): with no ``batch_size`` the
whole call is one write; with one, each batch is, and a batch refused after others raises
:class:`rfetch.errors.BulkPushError` naming exactly the jobs written (Sidekiq's push_bulk
writes 1,000 per MULTI/EXEC, which Redis does not roll back).
"""

from __future__ import annotations

from collections.abc import Sequence

from rfetch.errors import BulkPushError, ConfigError
from rfetch.push.buffer import BufferedJob


def check_batch_size(batch_size: int | None) -> None:
    """Raises ConfigError unless ``batch_size`` is None or a positive number of jobs."""
    if batch_size is not None and batch_size < 1:
        raise ConfigError(f"batch_size must be a positive number of jobs, got {batch_size}")


class BulkPush:
    """The jobs of one bulk push: their positions, jids, serialised forms, and the jids
    written so far.

    Args:
        positions: the position in ``args_list`` of every job kept by the client
            middleware, in push order.
        jids: the jid of each of those jobs.
        jobs: the jobs serialised, one per entry of ``positions``.
        batch_size: at most that many jobs per atomic write; None: one write.
    """

    def __init__(
        self,
        positions: Sequence[int],
        jids: Sequence[str],
        jobs: Sequence[BufferedJob],
        batch_size: int | None,
    ) -> None:
        self.positions = positions
        self.all_jids = jids
        self.jobs = jobs
        self.size = batch_size or max(len(jobs), 1)
        self.jids: list[str] = []

    def batches(self) -> list[tuple[int, int]]:
        """(start, end) of each atomic write, in push order."""
        return [(start, start + self.size) for start in range(0, len(self.jobs), self.size)]

    def wrote(self, start: int, end: int, written: Sequence[bool] | None) -> None:
        """Record the batch ``start:end`` written (``written``: per job, False when its
        unique lock was held; None when buffered, all kept)."""
        if written is None or all(written):
            self.jids.extend(self.all_jids[start:end])
            return
        for index, jid in enumerate(self.all_jids[start:end]):
            if written[index]:
                self.jids.append(jid)

    def refused(self, start: int, exc: Exception) -> None:
        """The batch at ``start`` was refused with ``exc`` (Redis, or a full buffer).

        Raises:
            BulkPushError: earlier batches were written; names exactly those jobs. When it
                was the first batch nothing was written and this returns (the caller
                re-raises ``exc``).
        """
        if start == 0:
            return
        handled = self.positions[start]
        raise BulkPushError(
            f"push_bulk wrote {len(self.jids)} job(s) (args_list[:{handled}]) and then "
            f"Redis refused a batch: {exc}; args_list[{handled}:] was not written",
            self.jids,
            handled,
        ) from exc
