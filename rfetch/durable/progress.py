"""An iterable job's progress as its busy-page line: items done, of ``total``, the rate and
the time left, written through the job's ``self.progress`` (``rfetch:progress:<jid>``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rfetch.formatting import duration

if TYPE_CHECKING:
    from rfetch.jobs.job import Job


class Progress:
    """Reports of one execution.

    Args:
        total: the job's item count (``IterableJob.total``), or None if unknown.
    """

    def __init__(self, total: int | None) -> None:
        self.total = total if isinstance(total, int) and total > 0 else None

    def line(self, done: int, seconds: float, done_here: int) -> tuple[float, str]:
        """``(percent, message)`` after ``done`` items in all, ``done_here`` of them in
        ``seconds`` of this execution."""
        rate = done_here / seconds if seconds > 0 else 0.0
        if self.total is None:
            return 0.0, f"{done:,} items done, {rate:,.1f}/s"
        percent = min(100.0, 100.0 * done / self.total)
        left = max(0, self.total - done)
        eta = f", about {duration(left / rate)} left" if rate > 0 else ""
        return percent, f"{done:,}/{self.total:,} items, {rate:,.1f}/s{eta}"

    def report(self, job: Job, done: int, seconds: float, done_here: int) -> None:
        """Write the line for ``job`` (nothing outside a worker; never raises for Redis)."""
        if job.progress_writer is None:
            return
        percent, message = self.line(done, seconds, done_here)
        job.progress_writer.write(job.jid, percent, message)
