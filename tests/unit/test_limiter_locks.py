"""The renewal thread of a process's concurrent locks (no Redis: the renewal is a fake)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import pytest

from rfetch.limiter.locks import LockKeeper


class FakeRenew:
    def __init__(
        self, lost: Sequence[str] = (), fail: int = 0, error: Exception | None = None
    ) -> None:
        self.calls: list[list[str]] = []
        self.lost = list(lost)
        self.fail = fail
        self.error = error or ConnectionError("Redis away")
        self.lock = threading.Lock()

    def __call__(self, tokens: Sequence[str]) -> list[str]:
        with self.lock:
            self.calls.append(list(tokens))
            if self.fail:
                self.fail -= 1
                raise self.error
        return [t for t in tokens if t in self.lost]


def _wait(predicate: object, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_renews_every_held_token_each_interval_then_ends() -> None:
    renew = FakeRenew()
    keeper = LockKeeper("erp", renew, 0.05)
    keeper.add("a")
    keeper.add("b")
    _wait(lambda: len(renew.calls) >= 2)
    assert renew.calls[0] == ["a", "b"]
    keeper.discard("a")
    keeper.discard("b")
    assert keeper.held() == []
    _wait(lambda: keeper._thread is None)  # ended after an interval with nothing held
    count = len(renew.calls)
    time.sleep(0.15)
    assert len(renew.calls) == count
    keeper.add("c")  # a new thread for a new lock
    _wait(lambda: ["c"] in renew.calls)
    keeper.discard("c")


@pytest.mark.parametrize("error", [ConnectionError("Redis away"), RuntimeError("a bug")])
def test_a_failed_renewal_is_tried_again_soon(error: Exception) -> None:
    renew = FakeRenew(fail=2, error=error)
    keeper = LockKeeper("erp", renew, 0.05)
    keeper.add("a")
    _wait(lambda: len(renew.calls) >= 3)
    keeper.discard("a")


def test_a_lost_lock_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    renew = FakeRenew(lost=["a"])
    keeper = LockKeeper("erp", renew, 0.05)
    with caplog.at_level(logging.ERROR, "rfetch.limiter"):
        keeper.add("a")
        _wait(lambda: "reclaimed while held" in caplog.text)
    keeper.discard("a")
