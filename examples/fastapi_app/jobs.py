"""The example's jobs; a worker loads them with ``-r examples.fastapi_app.jobs``."""

from __future__ import annotations

import asyncio

import rfetch


class SendWelcome(rfetch.Job):
    """Sends the welcome mail (here: waits as a mail API call would)."""

    queue = "mail"
    retry = 5

    async def perform(self, user_id: int, email: str) -> None:
        await asyncio.sleep(0.01)
