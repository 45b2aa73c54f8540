"""The worker's check before a job starts, with fake Redis replies and a recording JobRetry:
no round trip for a jid never announced, one GET for an announced one, the running-cancel
bookkeeping for a marked job, and a withdrawn mark forgotten."""

from __future__ import annotations

from typing import Any

from rfetch.jobs.job_control import CANCEL_TTL, cancel_mark
from rfetch.observability.stats import Stats
from rfetch.store.keys import Keys
from rfetch.worker.cancels import CancelCheck, CancelMarks
from rfetch.worker.reporting import ErrorReporter


class FakeRedis:
    def __init__(self) -> None:
        self.marks: dict[str, bytes] = {}
        self.index: list[tuple[bytes, float]] = []
        self.gets = 0

    def get(self, key: str) -> bytes | None:
        self.gets += 1
        return self.marks.get(key)

    def zrange(self, key: str, low: float, high: str, **options: Any) -> list[Any]:
        assert key == "rfetch:cancels" and options == {"byscore": True, "withscores": True}
        return [(jid, score) for jid, score in self.index if score >= low]


class FakeRetry:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bool, str]] = []

    def cancel(self, unit: Any, job: dict[str, Any], exc: BaseException, dead: bool) -> str:
        self.calls.append((job["jid"], dead, str(exc)))
        return "dead" if dead else "discarded"


class Unit:
    queue = "default"


def setup(now: float = 1000.0) -> tuple[FakeRedis, CancelMarks, CancelCheck, FakeRetry,
                                        list[BaseException]]:
    redis = FakeRedis()
    marks = CancelMarks(redis, Keys(""), clock=lambda: now)  # type: ignore[arg-type]
    retry = FakeRetry()
    seen: list[BaseException] = []
    report = ErrorReporter([lambda exc, ctx: seen.append(exc)])
    check = CancelCheck(marks, retry, Stats(Keys("")), report)  # type: ignore[arg-type]
    return redis, marks, check, retry, seen


def job(jid: str) -> dict[str, Any]:
    return {"class": "Mail", "jid": jid, "args": [], "queue": "default"}


def test_a_job_never_announced_starts_with_no_round_trip() -> None:
    redis, _, check, retry, _ = setup()
    redis.marks["cancel:a"] = cancel_mark("", False, 1.0).encode()  # no announcement
    assert not check.dropped(Unit(), job("a"))  # type: ignore[arg-type]
    assert redis.gets == 0 and retry.calls == []


def test_an_announced_marked_job_is_recorded_as_cancelled_not_run() -> None:
    redis, marks, check, retry, seen = setup()
    redis.marks["cancel:a"] = cancel_mark("operator", True, 1.0).encode()
    marks.note(b"a")
    assert check.dropped(Unit(), job("a"))  # type: ignore[arg-type]
    assert retry.calls == [("a", True, "cancelled: operator")]
    assert [type(e).__name__ for e in seen] == ["JobCancelled"]
    assert check.stats.take().failed == 1


def test_a_withdrawn_mark_is_forgotten_after_one_look() -> None:
    redis, marks, check, retry, _ = setup()
    marks.note("a")
    assert not check.dropped(Unit(), job("a"))  # type: ignore[arg-type]
    assert not check.dropped(Unit(), job("a"))  # type: ignore[arg-type]
    assert redis.gets == 1 and retry.calls == []


def test_reload_reads_the_index_and_drops_expired_entries() -> None:
    redis, marks, _, _, _ = setup(now=1000.0)
    redis.index = [(b"old", 999.0), (b"new", 1000.0 + CANCEL_TTL)]
    marks.note("gone")  # replaced by the index's view
    marks.reload()
    assert marks.announced("new") and not marks.announced("old")
    assert not marks.announced("gone")
