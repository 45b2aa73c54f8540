"""The one seam between a Client and where its serialised jobs go, and the test modes'
interception of every Client.

A :class:`rfetch.Client` validates a push, runs the client middleware and serialises the
payload; then it hands the serialised jobs to its sink, if it was given one, together with
``send``: the Client's own write to Redis (with the reliable-push buffer behind it). A sink
decides what happens next:

- ``rfetch.integrations.django`` calls ``send`` when the surrounding database transaction
  commits, and never if it rolls back (Sidekiq 7's transaction-aware client);
- ``rfetch.testing.FakeQueues`` given as a Client's own sink keeps the jobs in memory and
  never calls ``send``.

A sink may also have an asyncio form, ``async def awrite(jobs, send, asend)``, which the
asyncio client awaits instead of calling ``write`` from its event loop; ``asend`` is the
asyncio write, ``send`` the threaded one (the Django sink runs it at commit, in the thread of
the transaction). A Client without a sink calls ``send`` directly. A sink is given to the Client at
construction (``Client(config, sink=...)``); nothing is patched afterwards.

**Interception** (:data:`INTERCEPTION`): ``rfetch.testing``'s fake and inline modes do not
replace one client; they register a *test mode* here for their block. Every write a Client
makes (sync or asyncio, any Client however it was built, a batch's jobs, a Django
``immediate_client()``) looks here when it is made: while a test mode is registered, its
``send`` is the test mode's ``write`` instead of Redis, so the client's own sink still runs
first (a Django push inside ``transaction.atomic()`` reaches the fake queues at commit, and
never on rollback) and nothing reaches Redis (Sidekiq::Testing patches every client the
same way). The test mode's clock is also the push time of every Client
(:meth:`Interception.now`), so a scheduled job is due by the clock the test controls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from rfetch.push.buffer import BufferedJob

Send = Callable[[Sequence[BufferedJob]], "list[bool] | None"]
"""The Client's write to Redis: per job whether it was written (False: a unique job's lock
was held), or None when Redis was unreachable and the jobs were buffered."""

AsyncSend = Callable[[Sequence[BufferedJob]], Awaitable["list[bool] | None"]]
"""The asyncio client's write to Redis (:class:`rfetch.push.async_client.AsyncClient`), with
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


class TestMode(Sink, Protocol):
    """A test mode (``rfetch.testing``'s fake or inline mode): a sink that takes every
    Client's writes while it is registered, and the clock of their push times."""

    def now(self) -> float:
        """The test's time, float epoch seconds."""
        ...


def awaitable(send: Send) -> AsyncSend:
    """``send`` in the asyncio form a sink's ``awrite`` takes (a test mode's write is
    synchronous and touches no Redis, so it runs in the caller's loop)."""

    async def asend(jobs: Sequence[BufferedJob]) -> list[bool] | None:
        return send(jobs)

    return asend


def refused(jobs: Sequence[BufferedJob]) -> list[bool] | None:
    """The ``send`` a test mode is given: a test mode never writes to Redis.

    Raises:
        RuntimeError: always.
    """
    raise RuntimeError("a test mode holds this push; it is never written to Redis")


class Interception:
    """The registry of the active test modes, innermost last (process-wide, as
    Sidekiq::Testing's mode is: pushes made in other threads, such as a test client's
    application thread, are intercepted too). Thread-safe; reads take no lock.

    rfetch's only module-level mutable state besides the default client
    (:data:`rfetch.push.client.DEFAULT`) is the one instance, :data:`INTERCEPTION`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modes: tuple[TestMode, ...] = ()

    def current(self) -> TestMode | None:
        """The innermost registered test mode, or None (pushes go to Redis)."""
        modes = self._modes
        return modes[-1] if modes else None

    def now(self) -> float:
        """The push time, float epoch seconds: the innermost test mode's clock, else
        ``time.time()``."""
        modes = self._modes
        return modes[-1].now() if modes else time.time()

    @contextmanager
    def active(self, mode: TestMode) -> Iterator[TestMode]:
        """Register ``mode`` for the block (nested blocks: the innermost wins)."""
        with self._lock:
            self._modes = (*self._modes, mode)
        try:
            yield mode
        finally:
            with self._lock:
                modes = list(self._modes)
                modes.reverse()
                modes.remove(mode)
                modes.reverse()
                self._modes = tuple(modes)

    def send(self, send: Send) -> Send:
        """The write to use for a push made now: ``send`` (to Redis), or, inside a test
        mode, that mode's ``write`` (chosen now, so a push deferred to a later commit still
        goes where it was made)."""
        return routed(self.current(), send)


def routed(mode: TestMode | None, send: Send) -> Send:
    """``send``, or ``mode``'s write when a test mode is given (see :class:`Interception`)."""
    if mode is None:
        return send
    return lambda jobs: mode.write(jobs, refused)


INTERCEPTION = Interception()
"""The process-wide registry of test modes (see :class:`Interception`)."""
