"""The outcome matrix of docs/guarantees.md (*How a job's end reaches each feature*): for
every way a job ends (rows) and every feature its end must reach (columns), the documented
effect, checked with real worker processes and the session's redis-server.

Each test is one cell: a subject job (``tests/jobs/matrix_jobs.py``) pushed with one
feature's options is driven to one outcome (``tests/support/matrix.py``), then the cell's
effect is checked from outside rfetch: the jobs' evidence file, the callbacks that ran, the
dead set, a second push of a unique job, the recorded result, the stats counters. A
"waits" effect is checked by a marker job pushed behind the subject: once it ran, anything
the outcome had wrongly let go would have run before it. Cells that SIGKILL a worker are
``slow``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import redis

import rfetch
from rfetch.api import Api
from rfetch.push.client import DEFAULT
from tests.support.matrix import DRIVERS, LONG, Cell, Driver, dead_class, in_set
from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import JOBS_DIR

FEATURES = ("batch", "after", "key", "unique", "cap", "result", "stats")

EXPECT: dict[str, tuple[str, ...]] = {
    #                    batch       after       key         unique     cap     result   stats
    "succeeded":         ("success", "released", "released", "dropped", "back", "succeeded", "p1"),
    "failed":            ("complete", "held", "held", "kept", "back", "none", "p1 f1"),
    "died":              ("death", "dead", "released", "dropped", "back", "dead", "p1 f1"),
    "discarded":         ("death", "dead", "released", "dropped", "back", "dead", "p1 f1"),
    "expired":           ("death", "dead", "released", "dropped", "back", "dead", "-"),
    "cancelled_waiting": ("death", "dead", "released", "dropped", "back", "cancelled", "-"),
    # a scheduled job holds no ordering key and no cap slot: nothing to check there
    "cancelled_scheduled": ("death", "dead", "—", "dropped", "—", "cancelled", "-"),
    # a job in the retry set holds no cap slot
    "cancelled_retrying": ("death", "dead", "released", "dropped", "—", "cancelled", "p1 f1"),
    "cancelled_fetched": ("death", "dead", "released", "dropped", "back", "cancelled", "p1 f1"),
    "cancelled_running": ("death", "dead", "released", "dropped", "back", "cancelled", "p1 f1"),
    "overlimit":         ("waits", "held", "held", "kept", "back", "none", "p1"),
    "pushed_back":       ("waits", "held", "held", "kept", "back", "none", "-"),
    "recovered":         ("waits", "held", "held", "kept", "back", "none", "-"),
    "poison":            ("death", "dead", "released", "dropped", "back", "dead", "-"),
}
"""outcome -> the effect on each of :data:`FEATURES` (docs/guarantees.md's table; "—": no
cell)."""

SLOW = {"recovered", "poison"}
"""Outcomes that SIGKILL a worker (the project's rule: such tests are ``slow``)."""

XFAIL: dict[tuple[str, str], str] = {}
"""Cells that fail on main today, with what fails (kept, strict)."""

ERROR_CLASS = {"expired": "rfetch.JobExpired", "poison": "rfetch.PoisonPill"}


def cells() -> list[object]:
    return list(_cells())


def _cells() -> Iterator[object]:
    for outcome, effects in EXPECT.items():
        for feature, effect in zip(FEATURES, effects, strict=True):
            if effect == "—":
                continue
            marks: list[pytest.MarkDecorator] = []
            if outcome in SLOW:
                marks.append(pytest.mark.slow)
            if (outcome, feature) in XFAIL:
                marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[outcome, feature]))
            yield pytest.param(outcome, feature, effect, marks=marks,
                               id=f"{outcome}-{feature}-{effect.replace(' ', '')}")


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    return WorkerDefaults(args=("-r", "matrix_jobs"))


@pytest.fixture
def jobs(redis_server: RedisServer, r: redis.Redis) -> Iterator[ModuleType]:
    """The workers' job module, imported under their name, the default client on the
    session's server."""
    sys.path.insert(0, str(JOBS_DIR))
    try:
        module = importlib.import_module("matrix_jobs")
    finally:
        sys.path.remove(str(JOBS_DIR))
    rfetch.configure(redis_url=redis_server.url)
    yield module
    DEFAULT.set(None)


def settle(cell: Cell) -> None:
    """Push a marker behind everything queued and wait until it ran."""
    marker = cell.jobs.Next.perform_async()
    cell.wait(lambda: cell.done(marker), "the marker job")


def fired(cell: Cell) -> dict[str, int]:
    """Batch event -> how many times its callback ran."""
    return {event: len(times) for event, times in cell.callbacks().items()}


def check_batch(cell: Cell, drive: Driver, effect: str) -> None:
    """The callbacks of the subject's one-job batch."""
    if effect in ("complete", "waits"):
        cell.delay = LONG  # the job stays in the retry or scheduled set
    drive.reach(cell)
    if effect == "complete":  # Sidekiq Pro: every job ran, failures included
        cell.wait(lambda: fired(cell)["complete"] == 1, "the complete callback")
        settle(cell)
        assert fired(cell) == {"success": 0, "complete": 1, "death": 0}
        return
    if effect == "waits":
        if drive.runs_again:
            cell.worker()  # the gate still closed: it runs again and holds its thread
            cell.wait(lambda: len(cell.times("start", cell.subject)) == 2, "the second start")
        settle(cell)
        assert fired(cell) == {"success": 0, "complete": 0, "death": 0}
        if not drive.runs_again:
            return
        cell.open_gate()  # its success now fires success and complete, once each
        effect = "success"
    event = "success" if effect == "success" else "death"
    cell.wait(lambda: fired(cell)[event] == 1 and fired(cell)["complete"] == 1,
              f"the {event} and complete callbacks")
    settle(cell)
    other = "death" if event == "success" else "success"
    assert fired(cell) == {event: 1, "complete": 1, other: 0}


def check_follower(cell: Cell, drive: Driver, effect: str) -> None:
    """``after=`` and ordering key: the follower released, held or buried."""
    drive.reach(cell)
    if effect == "dead":
        cell.wait(lambda: in_set(cell.r, "dead", cell.follower), "the dependent in the dead set")
        assert not cell.times("start", cell.follower)
        return
    if effect == "held":
        drive.finish(cell)
    cell.wait(lambda: cell.done(cell.follower), "the follower's run")
    done = cell.times("done", cell.subject)
    if effect == "held" or done:
        # released at the subject's end, never before its last run finished
        assert min(cell.times("start", cell.follower)) > max(done), cell.record.lines()


def check_unique(cell: Cell, drive: Driver, effect: str) -> None:
    cell.delay = LONG
    drive.reach(cell)
    twin = cell.jobs.Next.set(unique_for=600, unique_key="u")
    if effect == "kept":
        assert twin.perform_async() is None
        return
    cell.wait(lambda: twin.perform_async() is not None, "a second push taking the lock")


def check_cap(cell: Cell, drive: Driver, effect: str) -> None:
    cell.delay = LONG
    drive.reach(cell)
    if drive.runs_again:
        drive.finish(cell)
    cell.wait(lambda: cell.done(cell.follower), "the next job of the concurrency key")


def check_result(cell: Cell, drive: Driver, effect: str, outcome: str) -> None:
    cell.delay = LONG
    drive.reach(cell)
    if effect == "none":
        assert cell.api.result_record(cell.subject) is None
        return
    cell.wait(lambda: cell.api.result_record(cell.subject), "the subject's record")
    record = cell.api.result_record(cell.subject)
    assert record is not None and record.status == effect, record
    if outcome in ERROR_CLASS:
        assert record.error_class == ERROR_CLASS[outcome], record


def counter(r: redis.Redis, name: str) -> int:
    return int(r.get(f"stat:{name}") or 0)


def check_stats(cell: Cell, drive: Driver, effect: str, outcome: str) -> None:
    """The counters after the outcome, a success of a pushed-back or recovered job when it
    runs again, and one marker job."""
    cell.delay = LONG
    drive.reach(cell)
    if drive.runs_again:
        drive.finish(cell)
    own = {part[0]: int(part[1:]) for part in effect.split() if part != "-"}
    processed, failed = own.get("p", 0) + drive.extra_processed + 1, own.get("f", 0)
    settle(cell)
    cell.wait(lambda: counter(cell.r, "processed") >= processed, f"{processed} processed")
    assert (counter(cell.r, "processed"), counter(cell.r, "failed")) == (processed, failed)


CHECKS: dict[str, Callable[[Cell, Driver, str, str], None]] = {
    "batch": lambda c, d, e, o: check_batch(c, d, e),
    "after": lambda c, d, e, o: check_follower(c, d, e),
    "key": lambda c, d, e, o: check_follower(c, d, e),
    "unique": lambda c, d, e, o: check_unique(c, d, e),
    "cap": lambda c, d, e, o: check_cap(c, d, e),
    "result": check_result,
    "stats": check_stats,
}


@pytest.mark.parametrize(("outcome", "feature", "effect"), cells())
def test_cell(
    outcome: str, feature: str, effect: str, r: redis.Redis, config: rfetch.Config,
    start_worker: StartWorker, record: Record, jobs: ModuleType, tmp_path: Path,
) -> None:
    cell = Cell(r, Api(config), record, start_worker, tmp_path / "gate", jobs, feature)
    CHECKS[feature](cell, DRIVERS[outcome], effect, outcome)
    if outcome == "poison":
        assert dead_class(r, cell.subject) == "rfetch.PoisonPill"
