"""Test modes: Sidekiq::Testing's ``fake!`` and ``inline!``, in Python form, with a clock,
retries and assertion helpers.

In your tests, push as the application does; the jobs do not reach Redis::

    from rfetch import testing

    def test_signup() -> None:
        with testing.fake() as queues:
            signup("ann@example.com")                  # calls SendWelcome.perform_async(...)
            queues.assert_enqueued(SendWelcome, args=[42, "welcome"], queue="mail")
            queues.drain()                             # runs them here, through the server
                                                       # middleware
            queues.drain(retries=True)                 # ... retrying failures as a worker

    with testing.inline():
        SendWelcome.perform_async(42, "welcome")       # runs at once, in this thread

With pytest, the fixtures ``rfetch_fake`` and ``rfetch_inline`` (from the ``rfetch`` pytest
plugin, loaded when rfetch is installed) do the same for one test.

Both modes register a *test mode* (:data:`rfetch.push.sink.INTERCEPTION`) that takes the write
of every Client, however and wherever it was built, sync or asyncio, in any thread: a
client made by an application factory, a Django ``immediate_client()``, a batch's jobs.
A Client's own sink still runs first, so a push inside a Django transaction reaches the
fake queues when the transaction commits, and never if it rolls back. Jobs with ``after=``
and chains (written by one Redis script) raise ``ConfigError`` in a test mode: nothing ever
reaches Redis silently.

Everything before the write still happens as in production: argument checks (native JSON
only: ``ArgsNotSerializable``), option checks, keyword arguments bound to ``perform``'s
parameters, ordering key and tenant, the client middleware, and the payload size limit;
each job is then read back from its JSON text, so a job sees exactly what a worker would.

What differs from a worker: jobs run in the calling thread; unique locks are not taken
(every push is accepted); by default an exception raised by a job propagates to the caller
(Sidekiq::Testing's drain does the same) and nothing is retried, ``drain(retries=True)``
retries as a worker. Scheduled jobs and retries are due by the fake mode's clock
(:class:`FakeClock`): ``drain()`` runs them too, moving the clock to their time;
``drain(scheduled=False)`` runs only what is due, after ``advance(seconds)`` (or
freezegun / time-machine) moved the clock.
"""

from __future__ import annotations

from rfetch.testing.clock import FakeClock
from rfetch.testing.fake import FakeQueues
from rfetch.testing.inline import InlineRunner
from rfetch.testing.modes import (
    advance,
    assert_enqueued,
    assert_not_enqueued,
    clear,
    current,
    drain,
    fake,
    inline,
    jobs,
)
from rfetch.testing.runner import JobRunner, find_job_class

__all__ = [
    "FakeClock",
    "FakeQueues",
    "InlineRunner",
    "JobRunner",
    "advance",
    "assert_enqueued",
    "assert_not_enqueued",
    "clear",
    "current",
    "drain",
    "fake",
    "find_job_class",
    "inline",
    "jobs",
]
