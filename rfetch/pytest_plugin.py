"""The ``rfetch`` pytest plugin: fixtures for rfetch's test modes (:mod:`rfetch.testing`).

Loaded by pytest when rfetch is installed (entry point ``pytest11``); nothing to configure::

    def test_signup(rfetch_fake: rfetch.testing.FakeQueues) -> None:
        signup("ann@example.com")
        assert len(rfetch_fake.jobs(SendWelcome)) == 1
        rfetch_fake.drain()

It only defines fixtures: a test that does not ask for one is not affected.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rfetch import testing


@pytest.fixture
def rfetch_fake() -> Iterator[testing.FakeQueues]:
    """Fake mode for one test: pushes go to the yielded in-memory queues."""
    with testing.fake() as queues:
        yield queues


@pytest.fixture
def rfetch_inline() -> Iterator[testing.InlineRunner]:
    """Inline mode for one test: every push runs its job at once."""
    with testing.inline() as runner:
        yield runner
