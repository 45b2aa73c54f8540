"""An async ``store_result`` job for the workflow tests (``-r workflow_async_jobs``). Kept out
of ``chaos_jobs``: an async class makes a worker start its event loop and async slots, which
changes how many jobs every chaos test's workers fetch."""

from __future__ import annotations

import asyncio

import rfetch


class AsyncSquare(rfetch.Job):
    """Reports progress, then returns ``n * n`` as its recorded result."""

    name = "workflow_async_jobs.AsyncSquare"
    store_result = 600

    async def perform(self, n: int) -> int:
        self.progress(50, "half")
        await asyncio.sleep(0.01)
        return n * n
