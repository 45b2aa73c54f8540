"""Orphan recovery: dead processes' jobs go back; live ones are never reaped; poison pills."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.store.keys import Keys
from rfetch.worker.launcher import Launcher
from rfetch.worker.orphan_recovery import POISON_ERROR_CLASS, OrphanRecovery
from rfetch.worker.registry import Registry
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

DEAD = "host:111:aaaaaaaaaaaa"
KEYS = Keys()


def make_recovery(r: redis.Redis, url: str, **fields: Any) -> OrphanRecovery:
    config = Config(redis_url=url, heartbeat_interval=0.2, heartbeat_ttl=1, **fields)
    return Launcher(config, Registry([]), redis=r, identity="me:1:bbbbbbbbbbbb").recovery


def orphan(
    r: redis.Redis, url: str, count: int, identity: str = DEAD, started: bool = True
) -> list[bytes]:
    """Jobs sitting in a dead process's private list, as a kill -9 leaves them: each
    started by one of its threads (its start mark written), unless not ``started``."""
    client = Client(Config(redis_url=url), r)
    client.push_bulk("Anything", [[i] for i in range(count)])
    moved = [
        r.lmove("queue:default", KEYS.private(identity, "default"), "RIGHT", "LEFT")
        for _ in range(count)
    ]
    r.hset(KEYS.identities, identity, json.dumps(["default"]))
    if started:
        for slot, raw in enumerate(moved):
            mark_started(r, raw, slot, identity)  # type: ignore[arg-type]
    return moved  # type: ignore[return-value]


def mark_started(r: redis.Redis, raw: bytes, slot: int = 0, identity: str = DEAD) -> None:
    """The start mark a thread of ``identity`` writes before it runs the job ``raw``."""
    r.hset(KEYS.started(identity), f"t{slot}", raw)


def test_second_look_reaps_and_keeps_order(r: redis.Redis, redis_server: RedisServer) -> None:
    fetched = orphan(r, redis_server.url, 3)
    recovery = make_recovery(r, redis_server.url)
    assert recovery.check() is True  # first look: suspect only
    assert r.llen(KEYS.private(DEAD, "default")) == 3
    # The second look reaps once two heartbeat intervals have passed by Redis's clock.
    wait_for(lambda: recovery.check() is False, 60, "the second look to reap the process")
    assert r.llen(KEYS.private(DEAD, "default")) == 0
    # Back at the head, oldest fetch first to run (the right end runs next).
    assert r.lrange("queue:default", 0, -1) == list(reversed(fetched))
    assert r.hget(KEYS.identities, DEAD) is None
    assert r.sismember("queues", "default")


def test_a_process_whose_heartbeat_returns_is_not_reaped(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    orphan(r, redis_server.url, 2)
    recovery = make_recovery(r, redis_server.url)
    assert recovery.check() is True
    r.hset(KEYS.process(DEAD), "beat", time.time())  # a frozen Redis thawed, it beat again
    # A negative: the second look must not reap, so it has to come after the point (two
    # heartbeat intervals, 0.4 s) where it would have reaped a process that stayed silent.
    time.sleep(0.45)
    recovery.check()
    assert r.llen(KEYS.private(DEAD, "default")) == 2
    assert r.hget(KEYS.suspects, DEAD) is None


def test_only_the_lock_holder_recovers(r: redis.Redis, redis_server: RedisServer) -> None:
    orphan(r, redis_server.url, 1)
    recovery = make_recovery(r, redis_server.url)
    live = "other:2:cccccccccccc"
    r.hset(KEYS.process(live), "beat", time.time())  # a live process holds the lock
    r.set(KEYS.recovery_lock, live, ex=30)
    assert recovery.check() is False
    assert r.hget(KEYS.suspects, DEAD) is None
    assert r.get(KEYS.recovery_lock) == live.encode()  # not released by us


def test_the_lock_of_a_dead_holder_is_broken(r: redis.Redis, redis_server: RedisServer) -> None:
    orphan(r, redis_server.url, 1)
    recovery = make_recovery(r, redis_server.url)
    r.set(KEYS.recovery_lock, DEAD, ex=30)  # it died while recovering
    assert recovery.check() is True  # took the lock, looked, suspects DEAD
    assert r.hget(KEYS.suspects, DEAD) is not None
    assert r.get(KEYS.recovery_lock) is None  # released after the check


def test_unknown_identity_found_by_scan(r: redis.Redis, redis_server: RedisServer) -> None:
    orphan(r, redis_server.url, 2)
    r.hdel(KEYS.identities, DEAD)  # e.g. written by another tool, or cleanup removed it
    recovery = make_recovery(r, redis_server.url)
    recovery.check()
    wait_for(lambda: recovery.check() is False, 60, "the second look to reap the process")
    assert r.llen(KEYS.private(DEAD, "default")) == 0
    assert r.llen("queue:default") == 2


def test_poison_pill_goes_dead_after_three_recoveries(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    seen: list[tuple[str, bool]] = []
    deaths: list[str] = []
    recovery = make_recovery(
        r,
        redis_server.url,
        on_recovery=lambda job, poison: seen.append((job["jid"], poison)),
        death_handlers=[lambda job, exc: deaths.append(job["jid"])],
    )
    [raw] = orphan(r, redis_server.url, 1)
    jid = json.loads(raw)["jid"]
    for round_ in range(3):
        if round_:  # it crashed its next worker again
            r.lmove("queue:default", KEYS.private(DEAD, "default"), "RIGHT", "LEFT")
            r.hset(KEYS.identities, DEAD, json.dumps(["default"]))
            mark_started(r, raw)
        recovery.reap(DEAD, ["default"])
    assert seen == [(jid, False), (jid, False), (jid, True)]
    assert deaths == [jid]
    assert r.llen("queue:default") == 0
    [entry] = r.zrange("dead", 0, -1)
    dead_job = json.loads(entry)
    assert dead_job["jid"] == jid
    assert dead_job["error_class"] == POISON_ERROR_CLASS
    assert "3 times" in dead_job["error_message"]
    assert r.get(KEYS.recoveries(jid)) is None


def test_poison_pill_with_dead_false_is_discarded(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    recovery = make_recovery(r, redis_server.url, poison_max_recoveries=1)
    Client(Config(redis_url=redis_server.url), r).push("Anything", [1], {"dead": False})
    raw = r.lmove("queue:default", KEYS.private(DEAD, "default"), "RIGHT", "LEFT")
    mark_started(r, raw)  # type: ignore[arg-type]
    recovery.reap(DEAD, ["default"])
    assert r.zcard("dead") == 0
    assert r.llen(KEYS.private(DEAD, "default")) == 0
    assert r.llen("queue:default") == 0


def test_a_job_held_but_not_started_is_pushed_back_without_counting(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    """A job its dead process had fetched but not started (no start mark) did not kill it:
    however often that happens, it is pushed back, never buried as a poison pill; the job
    the process did start beside it is counted."""
    recovery = make_recovery(r, redis_server.url)
    ran, waited = orphan(r, redis_server.url, 2, started=False)
    ran_jid, waited_jid = json.loads(ran)["jid"], json.loads(waited)["jid"]
    for round_ in range(5):
        if round_:  # fetched again by a process that dies holding both
            for _ in range(2):
                r.lmove("queue:default", KEYS.private(DEAD, "default"), "RIGHT", "LEFT")
            r.hset(KEYS.identities, DEAD, json.dumps(["default"]))
        if round_ < 2:
            mark_started(r, ran)
        recovery.reap(DEAD, ["default"])
        assert not r.exists(KEYS.started(DEAD))  # dropped with the dead process
    assert r.zcard("dead") == 0
    assert r.llen("queue:default") == 2
    assert r.get(KEYS.recoveries(waited_jid)) is None
    assert r.get(KEYS.recoveries(ran_jid)) == b"2"


def test_recovery_counter_expires_after_the_window(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    recovery = make_recovery(r, redis_server.url, poison_window=3600)
    [raw] = orphan(r, redis_server.url, 1)
    recovery.reap(DEAD, ["default"])
    ttl = r.ttl(KEYS.recoveries(json.loads(raw)["jid"]))
    assert 3500 < ttl <= 3600


@pytest.mark.slow  # a real worker SIGKILLed, then its jobs recovered by another
def test_killed_worker_jobs_run_elsewhere(
    r: redis.Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    record = tmp_path / "record"
    env = {
        "RFETCH_TEST_RECORD": str(record),
        "RFETCH_HEARTBEAT_INTERVAL": "0.5",
        "RFETCH_HEARTBEAT_TTL": "2",
        "RFETCH_ORPHAN_CHECK_INTERVAL": "1",
        "RFETCH_BLOCK_TIMEOUT": "0.5",
        "RFETCH_PREFETCH_HORIZON": "60",  # keep the 4 jobs fetched ahead until the kill
    }
    client = Client(Config(redis_url=redis_server.url), r)
    jids = client.push_bulk("testjobs.Sleep", [[0.3] for _ in range(20)])
    victim = WorkerProcess(redis_server.url, ["-r", "testjobs", "-c", "4"], env, tmp_path)
    victim_id = victim.identity(r)
    # -c 4 and the default prefetch (= concurrency): 4 jobs running and 4 fetched but not
    # started, all in the private list when the kill comes (batched fetch keeps
    # kill -9 recovery for jobs not started yet).
    wait_for(lambda: r.llen(KEYS.private(victim_id, "default")) == 8, 10, "the victim to fetch")
    victim.kill()
    survivor = WorkerProcess(redis_server.url, ["-r", "testjobs", "-c", "4"], env, tmp_path)
    try:

        def all_done() -> bool:
            if not record.exists():
                return False
            lines = record.read_text().splitlines()
            done = {ln.split()[1] for ln in lines if ln.startswith("done")}
            return set(jids) <= done

        wait_for(all_done, 30, "every job, the victim's included, to finish")
        assert r.llen(KEYS.private(victim_id, "default")) == 0
        # logged after the push-back, through the log writer: a job may finish first
        wait_for(lambda: "reaped dead process " + victim_id in survivor.log(), 10,
                 "the survivor to log the reaping")
    finally:
        survivor.signal(signal.SIGTERM)
        assert survivor.wait(15) == 0


@pytest.mark.parametrize("stray_count", [1, 3])
def test_stray_private_entries_are_pushed_back_after_a_connection_error(
    own_redis: RedisServer, tmp_path: Path, stray_count: int
) -> None:
    """A BLMOVE whose reply was lost leaves a job in the private list that no thread runs."""
    record = tmp_path / "record"
    env = {"RFETCH_TEST_RECORD": str(record), "RFETCH_BLOCK_TIMEOUT": "0.5"}
    r = own_redis.client()
    worker = WorkerProcess(own_redis.url, ["-r", "testjobs", "-c", "2"], env, tmp_path)
    try:
        identity = worker.identity(r)
        client = Client(Config(redis_url=own_redis.url), r)
        # Simulate moves whose replies never arrived: jobs in the private list, unheld.
        payloads = [client.build("testjobs.Noop", [i], {}, None) for i in range(stray_count)]
        r.lpush(KEYS.private(identity, "default"), *[json.dumps(p) for p in payloads])
        own_redis.restart()  # every connection of the worker fails once
        wait_for(
            lambda: record.exists() and len(record.read_text().splitlines()) >= stray_count,
            60,
            "the stray jobs to be pushed back and run",
        )
        r = own_redis.client()
        # The job records its line inside perform; its acknowledgement may follow a moment
        # later (deferred to the fetcher's next call), so the list empties soon after.
        wait_for(lambda: r.llen(KEYS.private(identity, "default")) == 0, 60,
                 "the private list to empty once the jobs are acknowledged")
        done = {ln.split()[1] for ln in record.read_text().splitlines()}
        assert done == {p["jid"] for p in payloads}
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0


def test_a_worker_starting_on_the_host_recovers_its_dead_predecessor_at_once(
    r: redis.Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    """systemd restarting a worker killed with kill -9: the new worker recovers the dead
    one's jobs at start-up, long before its heartbeat expires (60 s here, and no periodic
    check within 10 min), and leaves a live worker of the same host alone."""
    record = tmp_path / "record"
    env = {
        "RFETCH_TEST_RECORD": str(record),
        "RFETCH_HEARTBEAT_INTERVAL": "0.5",
        "RFETCH_HEARTBEAT_TTL": "60",
        "RFETCH_ORPHAN_CHECK_INTERVAL": "600",
        "RFETCH_BLOCK_TIMEOUT": "0.5",
    }

    def starts(jid: str) -> list[int]:
        lines = record.read_text().splitlines() if record.exists() else []
        return [int(f[2]) for f in (ln.split() for ln in lines) if f[:2] == ["start", jid]]

    client = Client(Config(redis_url=redis_server.url), r)
    on_a, on_b = ["-r", "testjobs", "-q", "a", "-t", "1"], ["-r", "testjobs", "-q", "b", "-t", "1"]
    dying = WorkerProcess(redis_server.url, on_a, env, tmp_path)
    live = WorkerProcess(redis_server.url, on_b, env, tmp_path)
    restarted: WorkerProcess | None = None
    try:
        dying_id, live_id = dying.identity(r), live.identity(r)
        held = client.push("testjobs.Sleep", [60], {"queue": "a"})
        running = client.push("testjobs.Sleep", [60], {"queue": "b"})
        wait_for(lambda: starts(held) == [dying.pid] and starts(running) == [live.pid], 10,
                 "each worker to start its job")
        dying.kill()
        assert r.exists(KEYS.process(dying_id)), "the dead worker's heartbeat is still alive"

        restarted = WorkerProcess(redis_server.url, on_a, env, tmp_path)
        wait_for(lambda: starts(held) == [dying.pid, restarted.pid], 15, restarted.log)
        assert r.llen(KEYS.private(dying_id, "a")) == 0
        assert not r.sismember("processes", dying_id)
        assert r.hget(KEYS.identities, dying_id) is None
        log = restarted.log()
        assert f"process {dying_id} of this host no longer exists" in log, log
        assert live_id not in log, "a live worker of the same host is left alone"
        assert starts(running) == [live.pid]
        assert r.sismember("processes", live_id)
    finally:
        for proc in (live, restarted):
            if proc is not None:
                proc.signal(signal.SIGTERM)
                assert proc.wait(15) == 0


@pytest.mark.slow  # a real worker SIGKILLed and left unreaped
def test_a_killed_worker_left_unreaped_by_its_parent_is_recovered_at_once(
    r: redis.Redis, redis_server: RedisServer, tmp_path: Path
) -> None:
    """A worker killed with kill -9 whose parent does not reap it (a shell, a supervisor
    other than rfetch's; here this test) stays a zombie: ``kill(pid, 0)`` still succeeds.
    A worker starting on the host still recovers its jobs at start-up, not after the
    heartbeat TTL (60 s here) and a periodic check (none within 10 min)."""
    record = tmp_path / "record"
    env = {
        "RFETCH_TEST_RECORD": str(record),
        "RFETCH_HEARTBEAT_INTERVAL": "0.5",
        "RFETCH_HEARTBEAT_TTL": "60",
        "RFETCH_ORPHAN_CHECK_INTERVAL": "600",
        "RFETCH_BLOCK_TIMEOUT": "0.5",
    }

    def starts(jid: str) -> list[int]:
        lines = record.read_text().splitlines() if record.exists() else []
        return [int(f[2]) for f in (ln.split() for ln in lines) if f[:2] == ["start", jid]]

    def state(pid: int) -> str:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
        return text[text.rfind(")") + 2]

    client = Client(Config(redis_url=redis_server.url), r)
    args = ["-r", "testjobs", "-q", "a", "-t", "1"]
    dying = WorkerProcess(redis_server.url, args, env, tmp_path)
    restarted: WorkerProcess | None = None
    try:
        dying_id = dying.identity(r)
        held = client.push("testjobs.Sleep", [60], {"queue": "a"})
        wait_for(lambda: starts(held) == [dying.pid], 10, "the worker to start its job")
        os.kill(dying.pid, signal.SIGKILL)  # and no wait(): the zombie stays
        wait_for(lambda: state(dying.pid) == "Z", 10, "the killed worker to be a zombie")
        assert r.exists(KEYS.process(dying_id)), "the dead worker's heartbeat is still alive"

        restarted = WorkerProcess(redis_server.url, args, env, tmp_path)
        wait_for(lambda: starts(held) == [dying.pid, restarted.pid], 20, restarted.log)
        assert state(dying.pid) == "Z", "still unreaped when its jobs were recovered"
        assert r.llen(KEYS.private(dying_id, "a")) == 0
        log = restarted.log()
        assert f"process {dying_id} of this host no longer exists" in log, log
    finally:
        dying.kill()  # reaps the zombie
        if restarted is not None:
            restarted.signal(signal.SIGTERM)
            assert restarted.wait(15) == 0
