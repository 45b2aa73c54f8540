"""Redis reply errors (not connection errors) hit real worker processes: no background
thread dies, no live worker is reaped, no job runs twice, and a worker starts while Redis
refuses writes.

The faults are real Redis states on a server of the test's own: ``OOM`` (``maxmemory 1``
with ``noeviction`` refuses every write that may grow memory), ``WRONGTYPE`` (the
``processes`` key made a string) and ``READONLY`` (the server made a replica of a primary
that does not answer, as a demoted primary after a failover).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest
import redis

from rfetch.config import Config
from rfetch.observability.stats import Stats
from rfetch.push.client import Client
from rfetch.worker.context import WorkerContext
from rfetch.worker.heartbeat import Heartbeat, make_identity
from rfetch.worker.orphan_recovery import recovery_bound
from tests.support.record import Record
from tests.support.redis_server import RedisServer, free_port
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import FAST_ENV, WorkerProcess

THREADS = (
    "rfetch-heartbeat",
    "rfetch-poller",
    "rfetch-recovery",
    "rfetch-pause-watcher",
    "rfetch-timekeeper",
    "rfetch-fetcher",
    "rfetch-processor-0",
)
FAST = Config(heartbeat_interval=0.5, heartbeat_ttl=2, orphan_check_interval=1.0)
"""FAST_ENV as a Config, for its recovery bound."""

Fault = tuple[Callable[[redis.Redis], None], Callable[[redis.Redis], None]]


def oom() -> Fault:
    def inject(r: redis.Redis) -> None:
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("maxmemory", 1)

    return inject, lambda r: r.config_set("maxmemory", 0)


def wrongtype() -> Fault:
    def inject(r: redis.Redis) -> None:
        with r.pipeline(transaction=True) as pipe:
            pipe.delete("processes")
            pipe.set("processes", "not a set")
            pipe.execute()

    return inject, lambda r: r.delete("processes")


def readonly() -> Fault:
    nobody = free_port()  # no server there: the replica never syncs and keeps its data
    return (
        lambda r: r.replicaof("127.0.0.1", nobody),
        lambda r: r.replicaof("NO", "ONE"),
    )


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    return WorkerDefaults(args=("-r", "testjobs", "-c", "2", "-t", "2"), env=FAST_ENV)


@pytest.fixture
def workers(
    own_redis: RedisServer, start_worker: StartWorker
) -> Callable[[], WorkerProcess]:
    """Start a worker on the test's own server (not waiting for its heartbeat)."""
    return lambda: start_worker(server=own_redis, ready=False)


def beat_of(r: redis.Redis, identity: str) -> float:
    value = r.hget(identity, "beat")
    return float(value) if value is not None else 0.0


def assert_threads_alive(proc: WorkerProcess) -> None:
    """TTIN makes the worker log every thread's stack: each long-lived one must be there."""
    proc.signal(signal.SIGTTIN)
    wait_for(lambda: "thread rfetch-heartbeat" in proc.log(), 10, proc.log)
    wait_for(lambda: all(f"thread {name} " in proc.log() for name in THREADS), 60, proc.log)


@pytest.mark.parametrize("fault", [oom, wrongtype, readonly])
def test_reply_errors_kill_no_thread_and_reap_no_live_worker(
    fault: Callable[[], Fault],
    own_redis: RedisServer,
    workers: Callable[[], WorkerProcess],
    record: Record,
) -> None:
    r = own_redis.client()
    first, second = workers(), workers()
    identities = [first.identity(r), second.identity(r)]
    client = Client(Config(redis_url=own_redis.url), r)
    sleeper = client.push("testjobs.Sleep", [12])
    wait_for(lambda: record.pids("start", sleeper), 10, "the long job to start")

    inject, undo = fault()
    inject(r)
    try:
        # Longer than a live worker may go without a heartbeat before it is reaped (TTL +
        # second look: 3 s), so a worker that stopped beating for good would be.
        time.sleep(FAST.heartbeat_ttl + 2 * FAST.heartbeat_interval + 2)
    finally:
        undo(r)
    undone = time.monotonic()

    wait_for(lambda: record.pids("done", sleeper), 20, "the long job to finish")
    later = [client.push("testjobs.Noop", [n]) for n in range(4)]
    scheduled = client.push("testjobs.Noop", ["due"], at=time.time())
    wait_for(
        lambda: all(record.pids("done", jid) for jid in [*later, scheduled]),
        20,
        lambda: first.log() + second.log(),
    )
    # Long enough for a wrongly suspected worker to be reaped: the whole recovery bound
    # since the fault ended (the last moment a heartbeat went missing); the long job,
    # running for most of it, would have run twice.
    time.sleep(max(0.0, undone + recovery_bound(FAST) - time.monotonic()))
    beats = [beat_of(r, identity) for identity in identities]
    wait_for(
        lambda: all(beat_of(r, i) > b for i, b in zip(identities, beats, strict=True)),
        10,
        "both heartbeats to go on",
    )

    assert len(record.pids("start", sleeper)) == 1, "the running job ran once"
    for proc in (first, second):
        log = proc.log()
        assert proc.proc.poll() is None, log
        assert "reaped dead process" not in log, log
        assert_threads_alive(proc)
        assert log.count("heartbeat failed") == 1, log
        assert "heartbeat recovered after" in log, log
    assert {m.decode() for m in r.smembers("processes")} == set(identities)


def test_a_worker_starts_while_redis_refuses_writes(
    own_redis: RedisServer, workers: Callable[[], WorkerProcess], record: Record
) -> None:
    r = own_redis.client()
    inject, undo = oom()
    inject(r)
    try:
        proc = workers()
        wait_for(lambda: "starting:" in proc.log(), 15, proc.log)
        # The first heartbeat and fetch are refused within this time; the worker stays.
        time.sleep(2 * FAST.heartbeat_interval + 1)
        assert proc.proc.poll() is None, proc.log()
    finally:
        undo(r)
    identity = proc.identity(r)
    jid = Client(Config(redis_url=own_redis.url), r).push("testjobs.Noop", [])
    wait_for(lambda: record.pids("done", jid) == [proc.pid], 15, proc.log)
    assert r.sismember("processes", identity)
    assert_threads_alive(proc)
    log = proc.log()
    assert log.count("heartbeat failed, Redis replied OOM") == 1, log
    assert log.count("fetch failed, Redis replied OOM") == 1, log


def heartbeat_on(server: RedisServer) -> tuple[Heartbeat, Stats, redis.Redis]:
    r = server.client()
    context = WorkerContext.build(Config(redis_url=server.url), r, make_identity())
    beat = Heartbeat(context, lambda name: None)
    return beat, context.stats, r


def test_counters_refused_by_oom_are_flushed_once_redis_accepts_writes(
    own_redis: RedisServer,
) -> None:
    heartbeat, stats, r = heartbeat_on(own_redis)
    stats.record("Job", False, 1.0)
    inject, undo = oom()
    inject(r)
    try:
        assert heartbeat.beat() is False
        assert heartbeat.beat() is False
    finally:
        undo(r)
    assert heartbeat.beat() is True
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert r.get("stat:processed") == b"1"
    assert r.get(f"stat:processed:{day}") == b"1"


def test_counters_partly_refused_are_not_counted_twice(own_redis: RedisServer) -> None:
    heartbeat, stats, r = heartbeat_on(own_redis)
    r.hset("stat:processed", "not", "a counter")  # its INCRBY: WRONGTYPE; the others count
    stats.record("Job", False, 1.0)
    assert heartbeat.beat() is False
    r.delete("stat:processed")
    assert heartbeat.beat() is True
    assert heartbeat.beat() is True
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert r.get(f"stat:processed:{day}") == b"1"
    assert r.get("stat:processed") is None  # that count was lost, not repeated
