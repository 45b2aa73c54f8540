"""The ``rfetch`` pytest plugin: fixtures for rfetch's test modes (:mod:`rfetch.testing`).

Loaded by pytest when rfetch is installed (entry point ``pytest11``); nothing to configure::

    def test_signup(rfetch_fake: rfetch.testing.FakeQueues) -> None:
        signup("ann@example.com")
        rfetch_fake.assert_enqueued(SendWelcome, args=[42, "ann@example.com"])
        rfetch_fake.drain(retries=True)

It only defines fixtures: a test that does not ask for one is not affected.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rfetch import testing


@pytest.fixture
def rfetch_fake() -> Iterator[testing.FakeQueues]:
    """Fake mode for one test: every client's pushes go to the yielded in-memory queues."""
    with testing.fake() as queues:
        yield queues


@pytest.fixture
def rfetch_inline() -> Iterator[testing.InlineRunner]:
    """Inline mode for one test: every push, through any client, runs its job at once."""
    with testing.inline() as runner:
        yield runner
