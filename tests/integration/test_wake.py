"""Wake-ups (rfetch/worker/wake.py): an idle worker of ``-q a -q b -q c`` with a long block
timeout starts a job that lands on ``c`` (pushed, due from the schedule, a chain's next
step, a batch callback) long before its blocking fetch on ``a`` would time out; strict
order holds; a wake-up heard while the worker looks is not lost; the listener survives a
dropped connection.

The worker blocks 60 s on ``a``: a job on ``c`` that starts within 20 s was woken (without
wake-ups it waits for the BLMOVE to time out, 60 s after the worker began it; each test
first runs a job on ``a`` so that a fresh BLMOVE is under way).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

import rfetch
from rfetch.config import Config, QueueSpec
from rfetch.push.client import Client
from rfetch.store.connection import connect
from rfetch.worker.context import WorkerContext
from rfetch.worker.wake import Waker
from tests.jobs.wake_jobs import CallbackOnC, Mark
from tests.support.gate_worker import make_due
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess

BLOCK = 60.0
"""The worker's block timeout, seconds."""

WOKEN = 20.0
"""A job started within this many seconds of its push was woken (well below BLOCK)."""


def starts(record: Path) -> dict[str, tuple[float, str]]:
    """jid -> (start time, label) of every recorded start."""
    out = {}
    if record.exists():
        for line in record.read_text().splitlines():
            event, jid, _pid, at, *rest = line.split(" ")
            if event == "start":
                out[jid] = (float(at), rest[0] if rest else "")
    return out


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "record.txt"


@pytest.fixture
def worker(redis_server: RedisServer, r: redis.Redis, record: Path, tmp_path: Path
           ) -> Iterator[WorkerProcess]:
    env = {**FAST_ENV, "RFETCH_TEST_RECORD": str(record),
           "RFETCH_BLOCK_TIMEOUT": str(BLOCK), "RFETCH_NETWORK_TIMEOUT": str(BLOCK + 10)}
    proc = WorkerProcess(redis_server.url, ["-r", "wake_jobs", "-c", "2", "-q", "a", "-q", "b",
                                            "-q", "c"], env=env, log_dir=tmp_path)
    proc.identity(r)
    yield proc
    proc.stop(30)


@pytest.fixture
def client(redis_server: RedisServer) -> Client:
    return Client(Config(redis_url=redis_server.url))


def fresh_block(client: Client, record: Path, proc: WorkerProcess) -> None:
    """Run a job on ``a`` and wait for it: the worker then idles in a new BLMOVE on ``a``
    (after a wake-up subscription is made, which the job's blocking fetch asked for)."""
    jid = client.push("wake_jobs.Mark", ["a"], {"queue": "a"})
    wait_for(lambda: jid in starts(record), 60, proc.log)
    time.sleep(1.0)  # the job ends, the fetcher looks and blocks again


def started_within(record: Path, jid: str | None, pushed: float, proc: WorkerProcess) -> float:
    assert jid is not None
    wait_for(lambda: jid in starts(record), BLOCK + 30, proc.log)
    return starts(record)[jid][0] - pushed


def test_a_job_pushed_to_the_third_queue_wakes_the_idle_worker(
    worker: WorkerProcess, client: Client, record: Path
) -> None:
    for _ in range(2):  # twice: the second wake-up comes on a standing subscription
        fresh_block(client, record, worker)
        pushed = time.time()
        jid = client.push("wake_jobs.Mark", ["c"], {"queue": "c"})
        assert started_within(record, jid, pushed, worker) < WOKEN, worker.log()


def test_a_scheduled_job_on_the_third_queue_starts_when_due(
    worker: WorkerProcess, client: Client, record: Path, r: redis.Redis
) -> None:
    jid = client.push("wake_jobs.Mark", ["c"], {"queue": "c"}, at=time.time() + 3600)
    fresh_block(client, record, worker)
    due = time.time()
    make_due(r, "schedule")  # the poller (every 0.5 s here) moves it to queue c
    assert started_within(record, jid, due, worker) < WOKEN, worker.log()


def test_a_chain_step_and_a_batch_callback_on_the_third_queue_start_at_once(
    worker: WorkerProcess, client: Client, record: Path
) -> None:
    fresh_block(client, record, worker)
    begun = time.time()
    chain = rfetch.chain(Mark.s("a").set(queue="a"), Mark.s("c").set(queue="c"), client=client)
    assert started_within(record, chain.jids[1], begun, worker) < WOKEN, worker.log()
    fresh_block(client, record, worker)
    begun = time.time()
    batch = rfetch.Batch(on_success=CallbackOnC, client=client)
    with batch.jobs():
        client.push("wake_jobs.Mark", ["a"], {"queue": "a"})
    wait_for(lambda: any(label == "callback" for _, label in starts(record).values()),
             BLOCK + 30, worker.log)
    called = [at for at, label in starts(record).values() if label == "callback"]
    assert called[0] - begun < WOKEN, worker.log()


def test_strict_order_holds_when_a_wake_up_finds_several_queues_with_jobs(
    redis_server: RedisServer, r: redis.Redis, record: Path, tmp_path: Path
) -> None:
    env = {**FAST_ENV, "RFETCH_TEST_RECORD": str(record),
           "RFETCH_BLOCK_TIMEOUT": str(BLOCK), "RFETCH_NETWORK_TIMEOUT": str(BLOCK + 10)}
    proc = WorkerProcess(redis_server.url, ["-r", "wake_jobs", "-c", "1", "-q", "a", "-q", "b",
                                            "-q", "c"], env=env, log_dir=tmp_path)
    try:
        proc.identity(r)
        client = Client(Config(redis_url=redis_server.url))
        fresh_block(client, record, proc)
        # One transaction: jobs on c (its wake-up) and on b, then the worker's fetch.
        jids = {q: str(client.push("wake_jobs.Mark", [q], {"queue": q}, at=time.time() + 3600))
                for q in ("c", "b")}
        members = cast("list[bytes]", r.zrange("schedule", 0, -1))
        assert len(members) == 2
        with r.pipeline(transaction=True) as pipe:
            pipe.zremrangebyrank("schedule", 0, -1)
            for q in ("c", "b"):
                pipe.lpush(f"queue:{q}", next(m for m in members if jids[q].encode() in m))
            pipe.publish("queue:c", "")
            pipe.execute()
        wait_for(lambda: all(j in starts(record) for j in jids.values()), BLOCK + 30, proc.log)
        got = starts(record)
        order = sorted(jids, key=lambda q: got[jids[q]][0])
        assert order == ["b", "c"], proc.log()  # b first: strict order, whoever woke it
    finally:
        proc.stop(30)


# -- the Waker against a real Redis, without a worker ---------------------------------


def waker_of(redis_server: RedisServer) -> tuple[Waker, redis.Redis]:
    config = Config(redis_url=redis_server.url, queues=[QueueSpec("a"), QueueSpec("c")],
                    block_timeout=30.0, network_timeout=40.0)
    client = connect(config)  # as a worker's: no automatic retries
    return Waker(WorkerContext.build(config, client, "host:1:abc")), client


def blmove(waker: Waker, client: redis.Redis) -> tuple[object, float]:
    """A 30 s BLMOVE of queue a through the waker: (its reply, seconds it took)."""
    began = time.monotonic()
    got = waker.blocking_call(client, "a", "BLMOVE", "queue:a", "queue:sq|x|a", "RIGHT", "LEFT",
                              30.0)
    return got, time.monotonic() - began


def test_a_wake_up_heard_while_the_worker_looks_skips_the_blocking_fetch(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    waker, client = waker_of(redis_server)
    waker.look()
    waker.wake("c")  # heard after the look, before the BLMOVE
    got, took = blmove(waker, client)
    assert got is None and took < WOKEN
    assert waker.woken()
    waker.look()
    assert not waker.woken()


def test_a_wake_up_heard_before_the_blocking_command_reaches_redis_ends_it(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The race: the wake-up's first CLIENT UNBLOCK finds nothing blocked (the BLMOVE is
    marked under way but not sent yet); the waker repeats it until the BLMOVE is in Redis."""
    waker, client = waker_of(redis_server)
    unblocks: list[bool] = []
    real_unblock = client.client_unblock

    def counted(cid: int, error: bool = False) -> bool:
        done = bool(real_unblock(cid, error))
        unblocks.append(done)
        return done

    client.client_unblock = counted  # type: ignore[method-assign,assignment]
    waking = threading.Thread(target=waker.wake, args=("c",))
    conn = client.connection_pool.get_connection()
    real_send: Any = conn.send_command

    def send_late(*args: object, **kwargs: object) -> None:
        if args and args[0] == "BLMOVE":
            waking.start()  # heard now, the BLMOVE not yet sent
            wait_for(lambda: bool(unblocks), 30, "a first CLIENT UNBLOCK")
        real_send(*args, **kwargs)

    conn.send_command = send_late  # type: ignore[method-assign]
    client.connection_pool.release(conn)  # the one connection the BLMOVE gets
    waker.look()
    got, took = blmove(waker, client)
    waking.join(30)
    assert got is None and took < WOKEN
    assert unblocks[0] is False and unblocks[-1] is True, unblocks


def pubsub_clients(r: redis.Redis) -> set[int]:
    """Ids of the subscribed connections."""
    return {int(c["id"]) for c in r.client_list(_type="pubsub")}


def test_the_listener_subscribes_again_after_its_connection_drops(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    waker, client = waker_of(redis_server)
    stop = threading.Event()
    listener = threading.Thread(target=waker.run, args=(stop,), daemon=True)
    listener.start()
    try:
        waker.look()
        got, took = blmove(waker, client)  # the first block asks for the subscription,
        assert got is None and took < WOKEN  # whose making wakes it (pushes before it)
        wait_for(lambda: waker.subscribed, 30, "the subscription")
        killed = pubsub_clients(r)
        assert killed and r.client_kill_filter(_type="pubsub") == len(killed)
        wait_for(lambda: pubsub_clients(r) - killed and waker.subscribed, 30,
                 "the subscription made again on a new connection")
        waker.look()
        timer = threading.Timer(0.5, lambda: r.publish("queue:c", ""))
        timer.start()
        got, took = blmove(waker, client)
        timer.join(30)
        assert got is None and took < WOKEN  # ended by the message, not the timeout
        assert listener.is_alive()
    finally:
        stop.set()
        listener.join(30)


def test_the_listener_unsubscribes_while_the_worker_is_busy_and_again_when_it_idles(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    waker, client = waker_of(redis_server)
    waker.linger = 1.0  # seconds without a blocking fetch: busy
    stop = threading.Event()
    listener = threading.Thread(target=waker.run, args=(stop,), daemon=True)
    listener.start()
    try:
        waker.look()
        got, took = blmove(waker, client)  # asks for the subscription; its making ends it
        assert got is None and took < WOKEN
        wait_for(lambda: waker.subscribed, 30, "the subscription")

        def pushes() -> None:
            for _ in range(60):
                r.publish("queue:c", "")
                time.sleep(0.05)

        busy = threading.Thread(target=pushes)
        busy.start()  # pushes keep coming while the worker does not block
        wait_for(lambda: r.pubsub_numsub("queue:c") == [(b"queue:c", 0)], 30,
                 "the unsubscription while busy")
        assert not waker.subscribed
        busy.join(30)
        waker.look()
        got, took = blmove(waker, client)  # idle again: subscribes, and is woken by that
        assert got is None and took < WOKEN
        wait_for(lambda: waker.subscribed, 30, "the subscription made again")
    finally:
        stop.set()
        listener.join(30)


def blmove_then(waker: Waker, client: redis.Redis, wake: Any) -> tuple[Any, Any]:
    """A 30 s BLMOVE of queue a with a follow-up LMOVE of queue c, which ``wake`` (called
    in another thread once the BLMOVE is wholly sent) ends: both replies."""

    def when_sent() -> None:
        wait_for(lambda: waker._blocked is not None and waker._blocked.sent, 30, "the BLMOVE")
        wake()

    waking = threading.Thread(target=when_sent)
    waking.start()
    got = waker.blocking_then(
        client, "a", ("BLMOVE", "queue:a", "queue:sq|x|a", "RIGHT", "LEFT", 30.0),
        ("LMOVE", "queue:c", "queue:sq|x|c", "RIGHT", "LEFT"),
    )
    waking.join(30)
    return got


def test_a_wake_up_appends_the_fetch_to_the_blocked_connection(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The follow-up runs in Redis right after the BLMOVE that the wake-up ended, on the
    same connection, and covers that wake-up: nothing is left to look at."""
    waker, client = waker_of(redis_server)
    r.lpush("queue:c", "job")
    waker.look()
    got, followed = blmove_then(waker, client, lambda: waker.wake("c"))
    assert got is None and followed == b"job"
    assert r.lrange("queue:sq|x|c", 0, -1) == [b"job"] and not waker.woken()
    assert waker.blocking_call(client, None, "PING") is True  # the connection is in step


def test_going_quiet_ends_the_blocking_fetch_with_no_fetch_after_it(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    waker, client = waker_of(redis_server)
    r.lpush("queue:c", "job")
    waker.look()
    got, followed = blmove_then(waker, client, waker.interrupt)
    assert got is None and followed is None
    assert r.lrange("queue:c", 0, -1) == [b"job"]
