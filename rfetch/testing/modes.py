"""The test-mode blocks, ``fake()`` and ``inline()``, and the module-level helpers that act
on the innermost fake mode."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rfetch.config import Config
from rfetch.jobs.job import Job
from rfetch.jobs.payload import Payload
from rfetch.push.client import DEFAULT, Client
from rfetch.push.sink import INTERCEPTION
from rfetch.testing.clock import FakeClock
from rfetch.testing.fake import FakeQueues
from rfetch.testing.inline import InlineRunner


def _test_config(config: Config | None) -> Config:
    """The given Config, else the default client's, else ``Config.from_env()``; without a
    push spool (a test client must not deliver a spool left by a real process)."""
    if config is None:
        current = DEFAULT.peek()
        config = current.config if current is not None else Config.from_env()
    return config.replace(push_spool=None) if config.push_spool else config


@contextmanager
def fake(config: Config | None = None, *, clock: FakeClock | None = None) -> Iterator[FakeQueues]:
    """Fake mode for the block: every push, through any Client (the default one, one built
    by an application factory, a Django ``immediate_client()``, sync or asyncio), goes to
    a :class:`FakeQueues` (yielded), never to Redis. A Client's own sink still runs first:
    a push inside a Django transaction reaches the queues when it commits.

    Args:
        config: the Config of the block's default client (its client middleware and
            payload limit) and of the server side of ``drain`` (server middleware,
            ``max_retries``, death handlers). Default: the current default client's
            Config, else ``Config.from_env()``.
        clock: when scheduled jobs and retries are due (default: a :class:`FakeClock`
            following ``time.time()``).
    """
    config = _test_config(config)
    queues = FakeQueues(config, clock)
    with _default_client(config), INTERCEPTION.active(queues):
        yield queues


@contextmanager
def inline(config: Config | None = None) -> Iterator[InlineRunner]:
    """Inline mode for the block: every push, through any Client, runs the job at once
    (the :class:`InlineRunner` is yielded). ``config`` as for :func:`fake`."""
    config = _test_config(config)
    runner = InlineRunner(config)
    with _default_client(config), INTERCEPTION.active(runner):
        yield runner


@contextmanager
def _default_client(config: Config) -> Iterator[None]:
    """A default client of ``config`` for the block, keeping the previous one's sink (the
    Django on-commit deferral); the previous one is put back after it."""
    before = DEFAULT.peek()
    previous = DEFAULT.swap(Client(config, sink=before.sink if before is not None else None))
    try:
        yield
    finally:
        DEFAULT.swap(previous)


def current() -> FakeQueues:
    """The FakeQueues of the innermost :func:`fake` block.

    Raises:
        RuntimeError: not inside ``fake()`` (or the ``rfetch_fake`` fixture), or inside
            an ``inline()`` block within it.
    """
    mode = INTERCEPTION.current()
    if not isinstance(mode, FakeQueues):
        raise RuntimeError(
            "not in rfetch's fake mode: use `with rfetch.testing.fake():` or the "
            "rfetch_fake fixture"
        )
    return mode


def jobs(job_class: type[Job] | None = None, *, queue: str | None = None) -> list[Payload]:
    """The waiting jobs of the current fake mode (see :meth:`FakeQueues.jobs`)."""
    return current().jobs(job_class, queue=queue)


def drain(*job_classes: type[Job], retries: bool = False, scheduled: bool = True) -> int:
    """Run the current fake mode's jobs (see :meth:`FakeQueues.drain`)."""
    return current().drain(*job_classes, retries=retries, scheduled=scheduled)


def clear(job_class: type[Job] | None = None, *, queue: str | None = None) -> int:
    """Forget the current fake mode's waiting jobs (see :meth:`FakeQueues.clear`)."""
    return current().clear(job_class, queue=queue)


def advance(seconds: float | dt.timedelta) -> float:
    """Move the current fake mode's clock forward (see :meth:`FakeClock.advance`)."""
    return current().advance(seconds)


def assert_enqueued(
    job_class: type[Job],
    *,
    args: Sequence[Any] | None = None,
    queue: str | None = None,
    at: float | dt.datetime | None = None,
    delay: float | dt.timedelta | None = None,
    count: int | None = None,
) -> list[Payload]:
    """Assert that the current fake mode has waiting ``job_class`` jobs that match; the
    matching payloads (rspec-sidekiq's ``have_enqueued_sidekiq_job``)::

        assert_enqueued(SendWelcome, args=[42, "welcome"], queue="mail")
        assert_enqueued(Reminder, delay=3600)         # perform_in(3600, ...)
        assert_enqueued(Reminder, count=2)

    Args:
        args: the argument list as a worker receives it (``unittest.mock.ANY`` matches
            any one argument); queue; at: the run time (epoch seconds or a datetime,
            within a second); delay: seconds from the push to the run time (within a
            second); count: exactly this many (default: at least one). None: any.

    Raises:
        AssertionError: none matches (or not ``count``); the message lists the waiting
            jobs of the class.
        RuntimeError: not in fake mode.
    """
    return current().assert_enqueued(
        job_class, args=args, queue=queue, at=at, delay=delay, count=count
    )


def assert_not_enqueued(
    job_class: type[Job], *, args: Sequence[Any] | None = None, queue: str | None = None
) -> None:
    """Assert that no waiting ``job_class`` job of the current fake mode matches.

    Raises:
        AssertionError: one does (they are listed). RuntimeError: not in fake mode.
    """
    current().assert_not_enqueued(job_class, args=args, queue=queue)
