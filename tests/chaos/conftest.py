"""Fixtures of the chaos suite."""

from __future__ import annotations

from collections.abc import Callable

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
