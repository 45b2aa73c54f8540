"""The leader lease's local view: renewal and follower timing, step-down, loss. The Lua side
is tested against a real Redis in tests/integration/test_periodic_scripts.py."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from rfetch.periodic.current import CURRENT, is_leader
from rfetch.periodic.lease import ELECTED, FOLLOWER, RENEWED, LeaderLease
from rfetch.store.replies import LeaderClaim as Claim


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeCommands:
    """Answers claims from a list; records resigns and waits."""

    answers: list[Claim] = field(default_factory=list)
    resigned: list[str] = field(default_factory=list)
    claims: int = 0
    woken: bool = False

    def claim(self, token: str, identity: str, ttl_ms: int) -> Claim:
        self.claims += 1
        return self.answers.pop(0)

    def resign(self, token: str, wake_ttl_ms: int) -> bool:
        self.resigned.append(token)
        return True

    def wait_for_wake(self, timeout: float) -> bool:
        return self.woken


def lease(commands: FakeCommands, clock: Clock, ttl: float = 15.0) -> LeaderLease:
    return LeaderLease(
        commands, "host:1:abc", ttl, monotonic=clock, wall=lambda: 5000.0,
        rng=random.Random(1),
    )


def test_elected_lease_is_leader_until_a_ttl_after_the_claim_was_sent() -> None:
    clock = Clock()
    commands = FakeCommands([Claim(ELECTED, "host:1:abc", 15.0, 5000.25)])
    lease_ = lease(commands, clock)
    assert not lease_.is_leader
    lease_.claim()
    assert lease_.is_leader
    assert lease_.redis_now() == pytest.approx(5000.25)
    clock.now += 14.9
    assert lease_.is_leader
    clock.now += 0.2
    assert not lease_.is_leader


def test_leader_renews_every_third_of_the_ttl() -> None:
    clock = Clock()
    commands = FakeCommands(
        [Claim(ELECTED, "me", 15.0, 5000.0), Claim(RENEWED, "me", 15.0, 5000.0)]
    )
    lease_ = lease(commands, clock)
    lease_.claim()
    assert not lease_.claim_due()
    assert lease_.seconds_to_claim() == pytest.approx(5.0)
    clock.now += 5.0
    assert lease_.claim_due()
    lease_.claim()
    clock.now += 14.0
    assert lease_.is_leader  # 19 s after election, 14 s after the renewal


def test_follower_looks_again_when_the_seen_lease_runs_out() -> None:
    clock = Clock()
    commands = FakeCommands([Claim(FOLLOWER, "other:2:def", 11.0, 5000.0)])
    lease_ = lease(commands, clock)
    lease_.claim()
    assert not lease_.is_leader
    assert lease_.holder == "other:2:def"
    wait = lease_.seconds_to_claim()
    assert 11.0 <= wait <= 11.25
    clock.now += wait
    assert lease_.claim_due()


def test_a_woken_follower_claims_at_once() -> None:
    clock = Clock()
    commands = FakeCommands([Claim(FOLLOWER, "other", 11.0, 5000.0)], woken=True)
    lease_ = lease(commands, clock)
    lease_.claim()
    assert lease_.wait_as_follower(11.0)
    assert lease_.claim_due()


def test_a_renewal_that_finds_another_leader_ends_the_leadership() -> None:
    clock = Clock()
    commands = FakeCommands(
        [Claim(ELECTED, "me", 15.0, 5000.0), Claim(FOLLOWER, "other", 15.0, 5000.0)]
    )
    lease_ = lease(commands, clock)
    lease_.claim()
    clock.now += 5
    lease_.claim()
    assert not lease_.is_leader


def test_lost_forgets_the_leadership_at_once() -> None:
    clock = Clock()
    lease_ = lease(FakeCommands([Claim(ELECTED, "me", 15.0, 5000.0)]), clock)
    lease_.claim()
    lease_.lost()
    assert not lease_.is_leader
    assert lease_.claim_due()


def test_step_down_resigns_a_held_lease_and_stops_claiming() -> None:
    clock = Clock()
    commands = FakeCommands([Claim(ELECTED, "me", 15.0, 5000.0)])
    lease_ = lease(commands, clock)
    lease_.claim()
    assert lease_.step_down()
    assert commands.resigned == [lease_.token]
    assert not lease_.is_leader
    assert lease_.claim() is None
    assert commands.claims == 1


def test_step_down_of_a_follower_sends_nothing() -> None:
    commands = FakeCommands([Claim(FOLLOWER, "other", 15.0, 5000.0)])
    lease_ = lease(commands, Clock())
    lease_.claim()
    assert not lease_.step_down()
    assert commands.resigned == []


def test_is_leader_follows_the_process_lease() -> None:
    clock = Clock()
    lease_ = lease(FakeCommands([Claim(ELECTED, "me", 15.0, 5000.0)]), clock)
    assert not is_leader()
    CURRENT.set(lease_)
    try:
        assert not is_leader()
        lease_.claim()
        assert is_leader()
        clock.now += 16
        assert not is_leader()
    finally:
        CURRENT.set(None)
    assert not is_leader()


def test_tokens_differ_per_lease() -> None:
    a = lease(FakeCommands(), Clock())
    b = lease(FakeCommands(), Clock())
    assert a.token != b.token
    assert a.token.startswith("host:1:abc#")
