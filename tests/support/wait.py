"""The one polling helper of the tests: wait for a condition instead of sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    predicate: Callable[[], object],
    timeout: float,
    what: str | Callable[[], str] = "the condition",
    *,
    step: float = 0.05,
    fail: bool = True,
) -> bool:
    """Poll ``predicate`` every ``step`` seconds until it is true or ``timeout`` seconds
    (monotonic clock) have passed; it is asked once more at the deadline.

    Args:
        predicate: the condition; any truthy value ends the wait.
        timeout: seconds to wait at most.
        what: what is awaited, for the failure message (a callable is called only on
            failure, e.g. to attach a worker's log).
        step: seconds between two polls.
        fail: on timeout, raise (default) or return False.

    Returns:
        True once the predicate holds; False on timeout when ``fail`` is False.

    Raises:
        AssertionError: on timeout, when ``fail`` is True.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    if predicate():
        return True
    if fail:
        text = what() if callable(what) else what
        raise AssertionError(f"timed out after {timeout} s waiting for {text}")
    return False
