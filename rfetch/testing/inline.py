"""Sidekiq::Testing.inline!: every push runs its job at once."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rfetch.config import Config
from rfetch.jobs.payload import Payload
from rfetch.push.buffer import BufferedJob
from rfetch.push.sink import AsyncSend, Send
from rfetch.testing.runner import JobRunner, read_job


class InlineRunner:
    """Sidekiq::Testing.inline!: a test mode (:class:`rfetch.push.sink.TestMode`) that runs
    every pushed job at once, in the pushing thread, through the server middleware; a
    job's exception is raised by the push (a scheduled job runs at once too).

    Args:
        config: the server middleware to run jobs through.

    Attributes:
        performed: the payloads run so far, in order.
    """

    def __init__(self, config: Config | None = None) -> None:
        self.runner = JobRunner(config if config is not None else Config())
        self.performed: list[Payload] = []

    def now(self) -> float:
        """``time.time()``: inline mode has no clock of its own."""
        return time.time()

    def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool]:
        """Run ``jobs`` now (a Client calls this; ``send`` is not used)."""
        for job in jobs:
            payload = read_job(job)
            self.performed.append(payload)
            self.runner.run(payload)
        return [True] * len(jobs)

    async def awrite(
        self, jobs: Sequence[BufferedJob], send: Send, asend: AsyncSend
    ) -> list[bool]:
        """The same for ``aperform_async``: async jobs are awaited in the caller's loop."""
        for job in jobs:
            payload = read_job(job)
            self.performed.append(payload)
            await self.runner.arun(payload)
        return [True] * len(jobs)
