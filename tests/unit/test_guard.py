"""ThreadGuard: the failure policy every long-lived thread shares (no Redis)."""

from __future__ import annotations

import logging

import pytest
from redis.exceptions import (
    ConnectionError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TimeoutError,
)

from rfetch.guard import ThreadGuard, failure_kind


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(caplog: pytest.LogCaptureFixture, **kwargs: object) -> tuple[ThreadGuard, list[str]]:
    caplog.set_level(logging.DEBUG, logger="test.guard")
    reported: list[str] = []
    guard = ThreadGuard(
        "heartbeat",
        logging.getLogger("test.guard"),
        report=lambda exc, ctx: reported.append(f"{ctx['context']}:{type(exc).__name__}"),
        clock=Clock(),
        **kwargs,  # type: ignore[arg-type]
    )
    return guard, reported


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_failure_kinds_name_the_reply_error() -> None:
    oom = OutOfMemoryError("command not allowed", status_code="OOM")  # as redis-py parses it
    assert failure_kind(oom) == "OutOfMemoryError OOM"
    assert failure_kind(ResponseError("WRONGTYPE Operation")) == "ResponseError WRONGTYPE"
    readonly = ReadOnlyError("You can't write", status_code="READONLY")
    assert failure_kind(readonly) == "ReadOnlyError READONLY"
    assert failure_kind(ResponseError("unknown command")) == "ResponseError"
    assert failure_kind(ConnectionError("refused")) == failure_kind(TimeoutError("t"))
    assert failure_kind(KeyError("x")) == "KeyError"


def test_each_kind_is_logged_and_reported_once_per_streak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard, reported = make(caplog)
    for _ in range(50):
        guard.failed(OutOfMemoryError("command not allowed", status_code="OOM"))
        guard.failed(ConnectionError("Connection refused"))
        guard.failed(KeyError("bug"))
    logged = errors_logged(caplog)
    assert len(logged) == 3, logged
    assert "heartbeat failed, Redis replied OOM" in logged[0]
    assert "heartbeat failed, Redis unreachable" in logged[1]
    assert "heartbeat failed (KeyError)" in logged[2]
    assert caplog.records[-1].levelno == logging.DEBUG
    # Connection errors are not reported to the error handlers (they are not bugs).
    assert reported == ["heartbeat:OutOfMemoryError", "heartbeat:KeyError"]

    guard.succeeded()
    assert "heartbeat recovered after 150 failure(s)" in caplog.records[-1].getMessage()
    guard.failed(ResponseError("OOM again"))
    assert len(errors_logged(caplog)) == 4, "a new streak logs its kinds again"


def test_back_off_doubles_up_to_the_cap_and_resets_on_success(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard, _ = make(caplog, first=0.5, cap=3.0)
    waits = [guard.failed(ResponseError("WRONGTYPE x")) for _ in range(6)]
    assert waits == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    assert guard.failing
    guard.succeeded()
    assert not guard.failing
    assert guard.failed(ResponseError("WRONGTYPE x")) == 0.5
    assert [guard.failed(KeyError()) for _ in range(200)][-1] == 3.0  # no overflow


def test_a_broken_error_handler_does_not_escape(caplog: pytest.LogCaptureFixture) -> None:
    def handler(exc: BaseException, ctx: dict[str, object]) -> None:
        raise RuntimeError("handler bug")

    guard = ThreadGuard("poller", logging.getLogger("test.guard"), report=handler)
    assert guard.failed(ValueError("x")) == guard.first
    assert any("error handler raised" in m for m in errors_logged(caplog))


def test_readonly_closes_the_idle_connections() -> None:
    class Pool:
        calls: list[bool] = []

        def disconnect(self, inuse_connections: bool = True) -> None:
            self.calls.append(inuse_connections)

    class Client:
        connection_pool = Pool()

    guard = ThreadGuard("fetch", logging.getLogger("test.guard"), redis=Client())  # type: ignore[arg-type]
    guard.failed(ResponseError("WRONGTYPE x"))
    assert Pool.calls == []
    guard.failed(ReadOnlyError("You can't write against a replica.", status_code="READONLY"))
    assert Pool.calls == [False]


def test_bad_back_off_is_refused() -> None:
    with pytest.raises(ValueError):
        ThreadGuard("x", logging.getLogger("test.guard"), first=0)
    with pytest.raises(ValueError):
        ThreadGuard("x", logging.getLogger("test.guard"), first=2, cap=1)
