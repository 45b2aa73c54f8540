"""The one seam between a Client and where its serialised jobs go.

A :class:`rfetch.Client` validates a push, runs the client middleware and serialises the
payload; then it hands the serialised jobs to its sink, if it was given one, together with
``send``: the Client's own write to Redis (with the reliable-push buffer behind it). A sink
decides what happens next:

- ``rfetch.testing``'s fake mode keeps the jobs in memory and never calls ``send``
  (Sidekiq::Testing.fake!); its inline mode runs each job at once (Sidekiq::Testing.inline!);
- ``rfetch.integrations.django`` calls ``send`` when the surrounding database transaction
  commits, and never if it rolls back (Sidekiq 7's transaction-aware client).

A sink may also have an asyncio form, ``async def awrite(jobs, send, asend)``, which the
asyncio client awaits instead of calling ``write`` from its event loop; ``asend`` is the
asyncio write, ``send`` the threaded one (the Django sink runs it at commit, in the thread of
the transaction). A Client without a sink calls ``send`` directly. A sink is given to the Client at
construction (``Client(config, sink=...)``); nothing is patched afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from rfetch.push_buffer import BufferedJob

Send = Callable[[Sequence[BufferedJob]], "list[bool] | None"]
"""The Client's write to Redis: per job whether it was written (False: a unique job's lock
was held), or None when Redis was unreachable and the jobs were buffered."""

AsyncSend = Callable[[Sequence[BufferedJob]], Awaitable["list[bool] | None"]]
"""The asyncio client's write to Redis (:class:`rfetch.async_client.AsyncClient`), with
:data:`Send`'s reply."""


class Sink(Protocol):
    """Where a Client's serialised jobs go (see the module docstring)."""

    def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool] | None:
        """Take ``jobs`` (in push order); return what ``send`` returns, or per job whether it
        counts as written (a False makes ``perform_async`` return None for that job).

        Raises:
            whatever the sink's mode raises; the push then raises it to the caller.
        """
        ...
