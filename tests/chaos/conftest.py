"""Fixtures of the chaos suite, and the check that every chaos test is marked ``slow``
(``scripts/test --fast`` leaves them out; ``scripts/test`` and CI run them)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def say(
    capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> Callable[[str], None]:
    """Print a line to the terminal even when pytest captures output (the suite's counts
    of lost jobs and duplicates belong in the test output)."""

    def emit(text: str) -> None:
        with capsys.disabled():
            for line in text.splitlines():
                print(f"[{request.node.name}] {line}", flush=True)

    return emit


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a chaos test without the ``slow`` marker (it would run in the fast tier)."""
    here = Path(__file__).resolve().parent
    unmarked = [
        item.nodeid
        for item in items
        if here in Path(item.path).resolve().parents and item.get_closest_marker("slow") is None
    ]
    if unmarked:
        raise pytest.UsageError(f"chaos tests must be marked slow: {', '.join(unmarked)}")
