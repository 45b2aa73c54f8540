"""The leader election and periodic Lua scripts against the real session redis-server,
through their typed functions (``rfetch.store.commands``, by way of
``rfetch.periodic.store``): each test sets keys up, runs scripts and checks every key they
may touch."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from rfetch.jobs.schedule import PeriodicRegistry, Schedule
from rfetch.periodic.lease import ELECTED, FOLLOWER, RENEWED, LeaderLease
from rfetch.periodic.store import PeriodicStore
from rfetch.periodic.ticker import BuiltJob, LeadershipLost, SyncEntry, Ticker
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from tests.support.redis_server import RedisServer

KEYS = Keys()
A, B = "hosta:1:aaaaaaaaaaaa#0001", "hostb:2:bbbbbbbbbbbb#0002"


@pytest.fixture
def commands(redis_server: RedisServer, r: redis.Redis) -> Iterator[PeriodicStore]:
    blocking = redis.Redis(port=redis_server.port, socket_timeout=30)
    yield PeriodicStore(Commands(r, KEYS), blocking)
    blocking.close()


def redis_now(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1_000_000


def job(name: str, tick: int) -> BuiltJob:
    jid = f"{tick:024x}"[-24:]
    payload = json.dumps(
        {"class": "Tick", "queue": "cron", "args": [], "jid": jid, "periodic": name, "tick": tick}
    )
    return BuiltJob(jid, "cron", payload.encode())


def queued_ticks(r: redis.Redis, queue: str = "cron") -> list[int]:
    return sorted(json.loads(p)["tick"] for p in r.lrange(KEYS.queue(queue), 0, -1))


def lead(commands: PeriodicStore, token: str = A) -> None:
    claim = commands.claim(token, token.split("#")[0], 10_000)
    assert claim.status in (ELECTED, RENEWED)


# -- leader_claim.lua / leader_resign.lua -----------------------------------------------


def test_claim_elects_renews_and_tells_followers_who_leads(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    first = commands.claim(A, "hosta:1", 10_000)
    assert first.status == ELECTED
    assert first.redis_time == pytest.approx(redis_now(r), abs=1)
    lease = r.hgetall(KEYS.leader)
    assert lease[b"token"] == A.encode() and lease[b"identity"] == b"hosta:1"
    assert 9_000 < r.pttl(KEYS.leader) <= 10_000
    assert commands.claim(A, "hosta:1", 10_000).status == RENEWED
    other = commands.claim(B, "hostb:2", 10_000)
    assert other.status == FOLLOWER
    assert other.holder == "hosta:1"
    assert 9 < other.remaining <= 10
    assert r.get(KEYS.leader_changes) == b"1"  # a renewal is not a change
    assert r.hget(KEYS.leader, "token") == A.encode()


def test_an_expired_lease_goes_to_the_next_claimant(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    assert commands.claim(A, "hosta:1", 200).status == ELECTED
    time.sleep(0.3)
    assert not r.exists(KEYS.leader)
    assert commands.claim(B, "hostb:2", 10_000).status == ELECTED
    assert commands.claim(A, "hosta:1", 10_000).status == FOLLOWER
    assert r.get(KEYS.leader_changes) == b"2"


def test_only_the_holder_resigns_and_one_follower_is_woken(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    lead(commands, A)
    assert not commands.resign(B, 5_000)
    assert r.hget(KEYS.leader, "token") == A.encode()
    assert not r.exists(KEYS.leader_wake)
    assert commands.resign(A, 5_000)
    assert not r.exists(KEYS.leader)
    assert r.llen(KEYS.leader_wake) == 1
    assert 0 < r.pttl(KEYS.leader_wake) <= 5_000
    assert commands.wait_for_wake(1.0)
    assert not commands.wait_for_wake(0.1)  # one element wakes one follower


def test_a_blocked_follower_takes_over_at_once_when_the_leader_resigns(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    leader = LeaderLease(commands, "hosta:1", 30.0)
    follower = LeaderLease(commands, "hostb:2", 30.0)
    assert leader.claim() is not None and leader.is_leader
    follower.claim()
    assert not follower.is_leader
    woken: list[bool] = []
    waiter = threading.Thread(target=lambda: woken.append(follower.wait_as_follower(25.0)))
    waiter.start()
    time.sleep(0.2)
    assert leader.step_down()
    waiter.join(60)
    assert woken == [True]  # woken by the step-down: neither its 25 s wait nor the 30 s lease
    claim = follower.claim()
    assert claim is not None and claim.status == ELECTED
    assert not r.exists(KEYS.leader_wake)  # an election empties the wake list


# -- periodic_sync.lua ----------------------------------------------------------------------


def entry(name: str, fingerprint: str = "f1") -> SyncEntry:
    return SyncEntry(name, json.dumps({"name": name}), fingerprint)


def test_sync_writes_definitions_and_starts_new_schedules_now(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    lead(commands)
    cursors = commands.sync(A, [entry("a"), entry("b")])
    assert cursors is not None
    assert all(abs(c - redis_now(r)) <= 1 for c in cursors)
    assert r.hgetall(KEYS.periodic) == {
        b"a": b'{"name": "a"}', b"b": b'{"name": "b"}',
    }
    assert r.hget(KEYS.periodic_state("a"), "fingerprint") == b"f1"


def test_sync_keeps_cursors_resets_changed_schedules_and_removes_absent_ones(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    lead(commands)
    commands.sync(A, [entry("same"), entry("changed"), entry("gone")])
    r.hset(KEYS.periodic_state("same"), mapping={"cursor": 1000, "paused": 1})
    r.hset(KEYS.periodic_state("changed"), "cursor", 1000)
    cursors = commands.sync(A, [entry("same"), entry("changed", "f2")])
    assert cursors is not None
    assert cursors[0] == 1000
    assert abs(cursors[1] - redis_now(r)) <= 1
    assert r.hget(KEYS.periodic_state("same"), "paused") == b"1"
    assert not r.exists(KEYS.periodic_state("gone"))
    assert set(r.hkeys(KEYS.periodic)) == {b"same", b"changed"}


def test_sync_by_a_non_leader_writes_nothing(r: redis.Redis, commands: PeriodicStore) -> None:
    lead(commands, A)
    assert commands.sync(B, [entry("a")]) is None
    assert not r.exists(KEYS.periodic)
    assert not r.exists(KEYS.periodic_state("a"))


# -- periodic_push.lua / periodic_skip.lua --------------------------------------------------


def test_push_writes_the_job_once_and_records_it(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    lead(commands)
    commands.sync(A, [entry("s")])
    tick = int(redis_now(r)) + 1
    time.sleep(max(0.0, tick - redis_now(r)) + 0.01)
    built = job("s", tick)
    assert commands.push_tick(A, "s", tick, 60, 120, built, False) == "pushed"
    assert r.lrange(KEYS.queue("cron"), 0, -1) == [built.payload]
    assert r.smembers(KEYS.queues) == {b"cron"}
    state = r.hgetall(KEYS.periodic_state("s"))
    assert state[b"cursor"] == str(tick).encode()
    assert state[b"last_tick"] == str(tick).encode()
    assert state[b"last_jid"] == built.jid.encode()
    assert state[b"pushed"] == b"1"
    assert b"caught_up" not in state
    marker = KEYS.periodic_tick("s", tick)
    assert r.get(marker) == built.jid.encode()
    assert 60 < r.ttl(marker) <= 120
    assert commands.push_tick(A, "s", tick, 60, 120, built, False) == "done"
    r.delete(KEYS.periodic_state("s"))  # even without the cursor, the marker holds
    assert commands.push_tick(A, "s", tick, 60, 120, built, False) == "done"
    assert r.llen(KEYS.queue("cron")) == 1


def test_push_refuses_early_stale_and_unled_ticks(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    lead(commands)
    commands.sync(A, [entry("s")])
    r.hset(KEYS.periodic_state("s"), "cursor", 0)
    now = int(redis_now(r))
    assert commands.push_tick(A, "s", now + 30, 60, 120, job("s", now + 30), False) == "early"
    assert commands.push_tick(A, "s", now - 90, 60, 120, job("s", now - 90), True) == "stale"
    assert commands.push_tick(B, "s", now - 1, 60, 120, job("s", now - 1), True) == "lost"
    assert not r.exists(KEYS.queue("cron"))
    assert r.hget(KEYS.periodic_state("s"), "cursor") == b"0"
    assert commands.push_tick(A, "s", now - 1, 60, 120, job("s", now - 1), True) == "pushed"
    assert r.hget(KEYS.periodic_state("s"), "caught_up") == b"1"


def test_a_paused_schedule_moves_its_cursor_and_pushes_nothing(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    lead(commands)
    commands.sync(A, [entry("s")])
    r.hset(KEYS.periodic_state("s"), mapping={"cursor": 0, "paused": 1})
    now = int(redis_now(r))
    assert commands.push_tick(A, "s", now - 2, 60, 120, job("s", now - 2), False) == "paused"
    assert not r.exists(KEYS.queue("cron"))
    assert r.hget(KEYS.periodic_state("s"), "cursor") == str(now - 2).encode()
    r.hdel(KEYS.periodic_state("s"), "paused")
    assert commands.push_tick(A, "s", now - 2, 60, 120, job("s", now - 2), False) == "done"
    assert commands.push_tick(A, "s", now - 1, 60, 120, job("s", now - 1), False) == "pushed"


def test_skip_counts_once_and_moves_the_cursor(r: redis.Redis, commands: PeriodicStore) -> None:
    lead(commands)
    commands.sync(A, [entry("s")])
    r.hset(KEYS.periodic_state("s"), "cursor", 100)
    assert commands.skip_ticks(B, "s", 500, 7) == "lost"
    assert commands.skip_ticks(A, "s", 500, 7) == "skipped"
    assert commands.skip_ticks(A, "s", 500, 7) == "done"
    assert commands.skip_ticks(A, "s", 600, 0) == "skipped"
    state = r.hgetall(KEYS.periodic_state("s"))
    assert state[b"skipped"] == b"7"
    assert state[b"last_skipped_tick"] == b"500"
    assert state[b"cursor"] == b"600"


def test_two_pushers_with_one_token_never_push_a_tick_twice(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    """Two processes that both believe they lead (a stale leader that kept its token's
    view): every tick is raced by both, and each lands once."""
    lead(commands)
    commands.sync(A, [entry("s")])
    now = int(redis_now(r))
    r.hset(KEYS.periodic_state("s"), "cursor", now - 300)
    ticks = range(now - 200, now)
    answers: list[str] = []
    barrier = threading.Barrier(2)

    def pusher() -> None:
        barrier.wait()
        for tick in ticks:
            answers.append(commands.push_tick(A, "s", tick, 3600, 7200, job("s", tick), True))

    threads = [threading.Thread(target=pusher) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert queued_ticks(r) == list(ticks)
    assert answers.count("pushed") == len(ticks)
    assert answers.count("done") == len(ticks)


# -- the ticker and the lease on the real scripts ----------------------------------------


def every_second(catch_up: float = 60) -> list[Schedule]:
    registry = PeriodicRegistry()
    registry.register("* * * * * *", "Tick", name="s", queue="cron", catch_up=catch_up)
    return list(registry)


def build(schedule: Schedule, tick: int) -> BuiltJob:
    return job(schedule.name, tick)


def test_a_stale_leader_pushes_nothing_after_its_lease_was_taken(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    """Leader A freezes past its TTL (its lease key runs out: deleted here); B is elected
    and catches up the gap; A wakes up and tries to push the same ticks with its old token:
    nothing is pushed twice, none is missing."""
    a, b = LeaderLease(commands, "hosta:1", 10.0), LeaderLease(commands, "hostb:2", 10.0)
    ticker_a = Ticker(every_second(), commands, build, 10.0)
    ticker_b = Ticker(every_second(), commands, build, 10.0)
    a.claim()
    assert a.is_leader
    ticker_a.sync(a.token, a.redis_now())
    start = int(r.hget(KEYS.periodic_state("s"), "cursor") or 0)
    time.sleep(max(0.0, start + 2 - redis_now(r)) + 0.05)
    ticker_a.run_due(a.token, a.redis_now())  # pushes start+1, start+2
    time.sleep(1.5)  # A "freezes"...
    r.delete(KEYS.leader)  # ... and its lease runs out
    b.claim()
    assert b.is_leader
    ticker_b.sync(b.token, b.redis_now())
    ticker_b.run_due(b.token, b.redis_now())  # catches up the ticks A missed
    with pytest.raises(LeadershipLost):
        ticker_a.run_due(a.token, a.redis_now() + 1)
    end = int(redis_now(r))
    ticker_b.run_due(b.token, float(end))
    ticks = queued_ticks(r)
    assert ticks == list(range(start + 1, end + 1))
    state = r.hgetall(KEYS.periodic_state("s"))
    assert int(state[b"pushed"]) == len(ticks)
    assert int(state[b"caught_up"]) >= 1


def test_ticker_skips_and_counts_ticks_older_than_the_window(
    r: redis.Redis, commands: PeriodicStore
) -> None:
    lease = LeaderLease(commands, "hosta:1", 10.0)
    lease.claim()
    ticker = Ticker(every_second(catch_up=5), commands, build, 10.0)
    ticker.sync(lease.token, lease.redis_now())
    now = int(redis_now(r))
    r.hset(KEYS.periodic_state("s"), "cursor", now - 30)
    ticker.reset()
    ticker.sync(lease.token, lease.redis_now())
    ticker.run_due(lease.token, float(now))
    skipped = int(r.hget(KEYS.periodic_state("s"), "skipped") or 0)
    pushed = queued_ticks(r)
    # now-29 .. now-6 are more than 5 s old; Redis's clock, a little past `now`, may find
    # one more stale. Every tick is either pushed or counted.
    assert 24 <= skipped <= 25
    assert pushed == list(range(now - 29 + skipped, now + 1))
