"""The user's server middleware (``Config.server_middleware``, :mod:`rfetch.jobs.middleware`)
as the innermost server step: it wraps ``perform`` only, inside every built-in step, so
it never sees a job that expired or was cancelled before it started, and sees the
exceptions ``perform`` raises (an over-limit, a cancel) before the steps handle them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rfetch.config import Config
from rfetch.jobs.middleware import run_server_chain, run_server_chain_async
from rfetch.worker.job_run import JobRun
from rfetch.worker.steps import AsyncPerform, Perform, Step

if TYPE_CHECKING:
    from rfetch.jobs.job import Job


class ServerChain(Step):
    """Runs ``perform`` inside ``config.server_middleware`` (read per job: an integration
    may add its middleware after the worker is built).

    Args:
        config: holds the chain, outermost first.
    """

    name = "server-middleware"

    def __init__(self, config: Config) -> None:
        self.config = config

    def wraps(self, run: JobRun) -> bool:
        """Whether there is a chain to run (``config.server_middleware`` is not empty)."""
        return bool(self.config.server_middleware)

    def wrap(self, run: JobRun, instance: Job, perform: Perform) -> None:
        """The chain's sync form, in the job's thread."""
        chain = self.config.server_middleware
        if not chain:
            perform()
            return
        run_server_chain(chain, instance, run.job, run.unit.queue, perform)

    async def awrap(self, run: JobRun, instance: Job, perform: AsyncPerform) -> None:
        """The chain's async form, on the event loop."""
        chain = self.config.server_middleware
        if not chain:
            await perform()
            return
        await run_server_chain_async(chain, instance, run.job, run.unit.queue, perform)
