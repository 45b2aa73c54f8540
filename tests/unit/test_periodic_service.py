"""The leader thread's loop: what it does as follower and leader, that it survives every
exception, and that stepping down ends it. Fakes stand for Redis."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from redis.exceptions import ConnectionError

from rfetch.guard import ThreadGuard
from rfetch.jobs.schedule import PeriodicRegistry, Schedule
from rfetch.periodic.lease import ELECTED, FOLLOWER, RENEWED, LeaderLease
from rfetch.periodic.service import PeriodicService, leader_guard
from rfetch.periodic.ticker import BuiltJob, SyncEntry, Ticker
from rfetch.store.replies import LeaderClaim as Claim


@dataclass
class Commands:
    """Lease and tick calls in memory: ``leader`` is whoever claimed first; pushes record
    their ticks."""

    leader: str | None = None
    fail_next: list[BaseException] = field(default_factory=list)
    pushed: list[int] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    resigned: int = 0
    resign_error: BaseException | None = None
    now: float = 1_780_000_000.0

    def _maybe_fail(self) -> None:
        if self.fail_next:
            raise self.fail_next.pop(0)

    def claim(self, token: str, identity: str, ttl_ms: int) -> Claim:
        self._maybe_fail()
        if self.leader is None:
            self.leader = token
            return Claim(ELECTED, identity, ttl_ms / 1000, self.now)
        if self.leader == token:
            return Claim(RENEWED, identity, ttl_ms / 1000, self.now)
        return Claim(FOLLOWER, "other", 7.0, self.now)

    def resign(self, token: str, wake_ttl_ms: int) -> bool:
        if self.resign_error is not None:
            raise self.resign_error
        self.resigned += 1
        if self.leader == token:
            self.leader = None
            return True
        return False

    def wait_for_wake(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return False

    def sync(self, token: str, entries: Sequence[SyncEntry]) -> list[int] | None:
        return [int(self.now) - 3 for _ in entries] if token == self.leader else None

    def push_tick(
        self, token: str, name: str, tick: int, window: float, marker_ttl: int,
        job: BuiltJob, late: bool,
    ) -> str:
        self._maybe_fail()
        if token != self.leader:
            return "lost"
        self.pushed.append(tick)
        return "pushed"

    def skip_ticks(self, token: str, name: str, through: int, count: int) -> str:
        return "skipped"


def schedules() -> list[Schedule]:
    registry = PeriodicRegistry()
    registry.register("* * * * * *", "Tick", name="s")
    return list(registry)


def build(schedule: Schedule, tick: int) -> BuiltJob:
    return BuiltJob("j", "default", b"{}")


def service(
    commands: Commands, reports: list[Any], guard: ThreadGuard | None = None
) -> PeriodicService:
    lease = LeaderLease(commands, "me", 15.0, wall=lambda: commands.now)
    ticker = Ticker(schedules(), commands, build, 15.0)
    report = lambda exc, ctx: reports.append((exc, ctx))  # noqa: E731
    return PeriodicService(lease, ticker, guard or leader_guard(report))


def test_the_leader_syncs_and_pushes_the_due_ticks() -> None:
    commands = Commands()
    svc = service(commands, [])
    wait = svc.step()
    assert svc.lease.is_leader
    assert commands.pushed == [int(commands.now) - 2, int(commands.now) - 1, int(commands.now)]
    assert 0 < wait <= 1.01  # the next second's tick


def test_a_follower_waits_for_the_lease_it_saw() -> None:
    commands = Commands(leader="someone else")
    svc = service(commands, [])
    wait = svc.step()
    assert not svc.lease.is_leader
    assert 7.0 <= wait <= 7.25
    assert commands.pushed == []


def test_the_loop_survives_redis_errors_and_other_exceptions() -> None:
    commands = Commands(fail_next=[ConnectionError("down"), RuntimeError("bug")])
    reports: list[Any] = []
    svc = service(commands, reports)
    stop = threading.Event()
    thread = threading.Thread(target=svc.run, args=(stop,), daemon=True)
    thread.start()
    for _ in range(200):
        if commands.pushed:
            break
        time.sleep(0.05)
    stop.set()
    svc.step_down()
    thread.join(5)
    assert not thread.is_alive()
    assert commands.pushed  # it went on after both failures
    assert [type(exc) for exc, _ in reports] == [RuntimeError]  # Redis errors are only logged
    assert reports[0][1] == {"context": "leader election"}


def test_a_repeated_failure_is_logged_and_reported_once_per_streak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bug = [RuntimeError("bug") for _ in range(5)]
    commands = Commands(fail_next=[*bug])
    reports: list[Any] = []
    guard = ThreadGuard(
        "leader election", logging.getLogger("rfetch.periodic"),
        lambda exc, ctx: reports.append(exc), first=0.01, cap=0.02,
    )
    svc = service(commands, reports, guard)
    stop = threading.Event()
    thread = threading.Thread(target=svc.run, args=(stop,), daemon=True)
    with caplog.at_level(logging.INFO, logger="rfetch.periodic"):
        thread.start()
        for _ in range(200):
            if commands.pushed:
                break
            time.sleep(0.05)
        stop.set()
        svc.step_down()
        thread.join(5)
    assert commands.pushed and not commands.fail_next  # all five failed, then it went on
    assert reports == [bug[0]]  # one report for the streak, not five
    failed = [r for r in caplog.records if "leader election failed" in r.getMessage()]
    recovered = [r for r in caplog.records if "recovered after 5 failure" in r.getMessage()]
    assert len(failed) == 1 and len(recovered) == 1


def test_step_down_resigns_and_ends_the_loop() -> None:
    commands = Commands()
    svc = service(commands, [])
    svc.step()
    svc.step_down()
    assert commands.leader is None
    assert not svc.lease.is_leader
    stop = threading.Event()
    svc.run(stop)  # returns at once: the lease is stopped
    assert commands.resigned == 1


def test_step_down_never_raises() -> None:
    commands = Commands(resign_error=ConnectionError("down"))
    svc = service(commands, [])
    svc.step()
    svc.step_down()
    assert not svc.lease.is_leader
