"""The worker process's lifecycle, with real ``rfetch worker`` subprocesses and
real signals: quiet (TSTP), shutdown with push-back (TERM/INT, a second TERM), TTIN stack
dumps, the heartbeat and remote signals, the process title, strict and weighted queue
order, and a Redis outage while working.

Jobs come from ``tests/jobs/testjobs.py`` (``-r testjobs``); they append
``<event> <jid> <pid> <time>`` lines to the ``RFETCH_TEST_RECORD`` file, the evidence of
what ran where. SIDEKIQ.md "Signals and shutdown" and the key table are the reference.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.version import __version__
from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import WorkerProcess

WORKER_ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.5",
    "RFETCH_BLOCK_TIMEOUT": "1",
    "RFETCH_POLL_INTERVAL_AVERAGE": "1",
    # Jobs fetched ahead stay behind a long job (no give-back within the tests' waits), so
    # the push-back of jobs not started is seen (tests/integration/test_prefetch.py tests
    # the give-back).
    "RFETCH_PREFETCH_HORIZON": "60",
}
EXIT_WAIT = 25.0
"""Upper bound for any worker exit we expect (seconds): generous for a loaded machine, and
below the 30 s the long jobs of these tests sleep, so an exit that waited for one of them
(a ``-t`` or a second TERM not obeyed) misses it."""


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    """``-r testjobs`` with this module's intervals."""
    return WorkerDefaults(env=WORKER_ENV)


@pytest.fixture
def client(redis_server: RedisServer, r: redis.Redis) -> Client:
    return Client(Config(redis_url=redis_server.url), r)


def push(client: Client, job: str, args: list[Any], queue: str = "default") -> str:
    """Push ``testjobs.<job>``; its jid."""
    jid = client.push(f"testjobs.{job}", args, {"queue": queue})
    assert jid is not None
    return jid


def lrange(r: redis.Redis, key: str | bytes) -> list[bytes]:
    """A whole list, left to right."""
    return cast("list[bytes]", r.lrange(key, 0, -1))


def payload_of(r: redis.Redis, queue: str, jid: str) -> bytes:
    """The exact bytes of job ``jid`` in ``queue:<queue>``."""
    for raw in lrange(r, f"queue:{queue}"):
        if json.loads(raw)["jid"] == jid:
            return raw
    raise AssertionError(f"job {jid} is not in queue:{queue}")


def private_key(identity: str, queue: str = "default") -> str:
    return f"queue:sq|{identity}|{queue}"


def all_private_lists(r: redis.Redis) -> dict[bytes, list[bytes]]:
    """Every private list (SCAN ``queue:sq|*``) with its contents."""
    return {key: lrange(r, key) for key in r.scan_iter(match="queue:sq|*")}


def stop(proc: WorkerProcess, sig: signal.Signals = signal.SIGTERM) -> float:
    """Send ``sig``, expect exit code 0; returns the seconds the exit took."""
    started = time.monotonic()
    proc.signal(sig)
    code = proc.wait(EXIT_WAIT)
    elapsed = time.monotonic() - started
    assert code == 0, proc.log()
    return elapsed


def title(proc: WorkerProcess) -> str:
    """The process title, as ``ps`` shows it (``/proc/<pid>/cmdline``)."""
    raw = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    return raw.split(b"\x00")[0].decode()


def hash_field(r: redis.Redis, key: str, field: str) -> str | None:
    value = cast("bytes | None", r.hget(key, field))
    return None if value is None else value.decode()


# -- TSTP ------------------------------------------------------------------------------------


def test_tstp_finishes_running_jobs_and_takes_no_new_ones(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    worker = start_worker("-c", "2", "-t", "5")
    ident = worker.identity(r)
    long_jid = push(client, "Sleep", [3])
    wait_for(lambda: record.has("start", long_jid, worker.pid), 60, "the long job to start")

    worker.signal(signal.SIGTSTP)
    wait_for(lambda: hash_field(r, ident, "quiet") == "true", 60, "quiet=true in the heartbeat")
    later = [push(client, "Noop", [n]) for n in range(3)]

    wait_for(lambda: record.has("done", long_jid, worker.pid), 60, "the running job to finish")
    # A negative (no new job is taken, the process does not end) needs a span: long enough
    # for a blocking fetch (1 s) and two heartbeats to have happened.
    time.sleep(1.5)
    assert worker.proc.poll() is None, "TSTP must not end the process"
    assert sorted(json.loads(raw)["jid"] for raw in lrange(r, "queue:default")) == sorted(later)
    assert not any(record.has("done", jid) for jid in later)
    assert hash_field(r, ident, "quiet") == "true"
    assert hash_field(r, ident, "busy") == "0"
    assert r.llen(private_key(ident)) == 0

    stop(worker)
    assert r.llen("queue:default") == 3
    assert not r.sismember("processes", ident)


# -- TERM / INT --------------------------------------------------------------------------------


def test_term_pushes_back_a_job_longer_than_the_timeout_and_another_worker_runs_it(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    long_jid = push(client, "Sleep", [30])
    raw = payload_of(r, "default", long_jid)
    # One thread and no prefetch: jobs pushed later wait in the queue.
    first = start_worker("-c", "1", "--prefetch", "0", "-t", "1")
    ident = first.identity(r)
    wait_for(lambda: record.has("start", long_jid, first.pid), 60, "the long job to start")
    waiting = [push(client, "Noop", [n]) for n in range(2)]
    waiting_raw = [payload_of(r, "default", jid) for jid in waiting]

    elapsed = stop(first)
    assert elapsed < EXIT_WAIT, f"exit took {elapsed:.2f} s with -t 1"
    assert "stopped (1 job(s) pushed back)" in first.log()
    # Back at the head (right end, next to run) with the same bytes, ahead of the jobs that
    # were waiting; the private list is empty and the queue is still in ``queues``.
    assert lrange(r, "queue:default") == [waiting_raw[1], waiting_raw[0], raw]
    assert r.lindex("queue:default", -1) == raw
    assert not r.exists(private_key(ident))
    assert r.sismember("queues", "default")
    assert not r.sismember("processes", ident)
    assert not record.has("done", long_jid)

    second = start_worker("-c", "1", "--prefetch", "0", "-t", "0")
    wait_for(lambda: record.has("start", long_jid, second.pid), 60, "a second worker to run it")
    assert not any(record.has("done", jid) for jid in waiting), "the pushed-back job runs first"
    stop(second)
    assert r.lindex("queue:default", -1) == raw


def test_second_term_stops_at_once_and_still_pushes_back(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    jid = push(client, "Sleep", [30])
    raw = payload_of(r, "default", jid)
    worker = start_worker("-c", "1", "-t", "30")
    ident = worker.identity(r)
    wait_for(lambda: record.has("start", jid, worker.pid), 60, "the job to start")

    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    wait_for(lambda: title(worker).endswith(" stopping"), 60, "the title to show stopping")
    time.sleep(0.5)  # a negative: the process must not exit within this span
    assert worker.proc.poll() is None, "the first TERM waits for the running job"
    worker.signal(signal.SIGTERM)
    assert worker.wait(EXIT_WAIT) == 0, worker.log()
    elapsed = time.monotonic() - started
    assert elapsed < EXIT_WAIT, f"took {elapsed:.2f} s after two TERMs with -t 30"
    assert "second TERM" in worker.log()
    assert lrange(r, "queue:default") == [raw]
    assert not r.exists(private_key(ident))
    assert not r.sismember("processes", ident)


def push_sleepers(client: Client, r: redis.Redis, first_seconds: float) -> list[bytes]:
    """Four Sleep jobs; the first (oldest, next to run) sleeps ``first_seconds``, the others
    30 s. Returns the queue's contents, left to right (the first job is the rightmost)."""
    for seconds in (first_seconds, 30, 30, 30):
        push(client, "Sleep", [seconds])
    queue = lrange(r, "queue:default")
    assert len(queue) == 4
    return queue


def held_one_running_one_prefetched(
    start_worker: StartWorker, r: redis.Redis, record: Record, timeout: str
) -> tuple[WorkerProcess, str, str]:
    """A ``-c 1`` worker (prefetch 1) running the first job with the second one prefetched."""
    worker = start_worker("-c", "1", "-t", timeout)
    ident = worker.identity(r)
    wait_for(lambda: r.llen(private_key(ident)) == 2, 60, "one running and one prefetched job")
    first_jid = json.loads(r.lindex(private_key(ident), -1) or b"{}")["jid"]
    wait_for(lambda: record.has("start", first_jid, worker.pid), 60, "the first job to start")
    return worker, ident, first_jid


def test_term_pushes_back_prefetched_jobs_at_once(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    s4, s3, s2, s1 = push_sleepers(client, r, first_seconds=8)
    worker, ident, first_jid = held_one_running_one_prefetched(start_worker, r, record, "20")
    assert json.loads(s1)["jid"] == first_jid
    assert lrange(r, private_key(ident)) == [s2, s1]

    worker.signal(signal.SIGTERM)
    # While the first job still runs, the prefetched one is already back, in order.
    wait_for(lambda: lrange(r, "queue:default") == [s4, s3, s2], 6, "prefetched job back")
    assert lrange(r, private_key(ident)) == [s1]
    assert not record.has("done", first_jid)

    assert worker.wait(EXIT_WAIT) == 0, worker.log()
    assert record.has("done", first_jid, worker.pid), "the running job finished within -t"
    assert lrange(r, "queue:default") == [s4, s3, s2]
    assert all_private_lists(r) == {}


def test_tstp_pushes_back_prefetched_jobs_then_term_pushes_back_the_running_one(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    s4, s3, s2, s1 = push_sleepers(client, r, first_seconds=30)
    worker, ident, _ = held_one_running_one_prefetched(start_worker, r, record, "1")

    worker.signal(signal.SIGTSTP)
    wait_for(lambda: lrange(r, "queue:default") == [s4, s3, s2], 20, "prefetched job back")
    assert lrange(r, private_key(ident)) == [s1]
    wait_for(lambda: hash_field(r, ident, "quiet") == "true", 60, "quiet=true in the heartbeat")

    stop(worker)
    assert lrange(r, "queue:default") == [s4, s3, s2, s1], "original order"
    assert all_private_lists(r) == {}


# -- heartbeat and remote control ------------------------------------------------------------


def test_heartbeat_describes_the_process_and_its_running_job(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    jid = push(client, "Sleep", [30])
    raw = payload_of(r, "default", jid)
    before = time.time()
    worker = start_worker("-c", "2", "-t", "0", "-g", "hbtag", "--label", "blue")
    ident = worker.identity(r)
    assert re.fullmatch(rf"{re.escape(socket.gethostname())}:{worker.pid}:[0-9a-f]{{12}}", ident)
    assert r.sismember("processes", ident)
    wait_for(lambda: record.has("start", jid, worker.pid), 60, "the job to start")
    wait_for(lambda: hash_field(r, ident, "busy") == "1", 60, "busy=1 in the heartbeat")

    beat = r.hgetall(ident)
    assert {b"info", b"busy", b"beat", b"quiet", b"rss", b"rtt_us"} <= set(beat)
    info = json.loads(beat[b"info"])
    assert info["hostname"] == socket.gethostname()
    assert info["pid"] == worker.pid
    assert info["identity"] == ident
    assert info["tag"] == "hbtag"
    assert info["concurrency"] == 2
    assert info["queues"] == ["default"]
    assert info["labels"] == ["blue"]
    assert info["version"] == __version__
    assert before - 1 <= info["started_at"] <= time.time()
    assert beat[b"quiet"] == b"false"
    assert int(beat[b"rss"]) > 0
    assert int(beat[b"rtt_us"]) >= 0
    assert 0 < r.ttl(ident) <= 60

    work = r.hgetall(f"{ident}:work")
    assert len(work) == 1
    entry = json.loads(next(iter(work.values())))
    assert entry["queue"] == "default"
    assert entry["payload"].encode() == raw
    assert before - 1 <= entry["run_at"] <= time.time()
    assert 0 < r.ttl(f"{ident}:work") <= 60

    first_beat = float(beat[b"beat"])
    wait_for(lambda: float(r.hget(ident, "beat") or 0) > first_beat, 60, "the next heartbeat")

    stop(worker)
    assert not r.sismember("processes", ident)
    assert not r.exists(ident, f"{ident}:work")


def test_remote_signals_quiet_then_stop_the_worker(
    start_worker: StartWorker, r: redis.Redis
) -> None:
    worker = start_worker("-c", "2", "-t", "1")
    ident = worker.identity(r)
    assert hash_field(r, ident, "quiet") == "false"

    r.lpush(f"{ident}-signals", "TSTP")
    wait_for(lambda: hash_field(r, ident, "quiet") == "true", 60, "quiet=true after remote TSTP")
    assert worker.proc.poll() is None
    assert r.llen(f"{ident}-signals") == 0

    r.lpush(f"{ident}-signals", "TERM")
    assert worker.wait(EXIT_WAIT) == 0, worker.log()
    log = worker.log()
    assert "remote signal TSTP" in log and "remote signal TERM" in log
    assert not r.sismember("processes", ident)


def test_ttin_logs_every_threads_stack(start_worker: StartWorker, r: redis.Redis) -> None:
    worker = start_worker("-c", "2", "-t", "1")
    assert "rfetch-fetcher" not in worker.log()
    worker.signal(signal.SIGTTIN)
    names = ("rfetch-fetcher", "rfetch-processor-0", "rfetch-processor-1", "rfetch-heartbeat")
    wait_for(lambda: all(name in worker.log() for name in names), 60, "thread stacks in the log")
    assert "manager.py" in worker.log(), "a stack, not only thread names"
    assert worker.proc.poll() is None
    stop(worker)


def test_process_title_shows_version_tag_busy_and_quiet(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    worker = start_worker("-c", "3", "-t", "0", "-g", "titletag")
    expected = f"rfetch {__version__} titletag [0 of 3 busy]"
    wait_for(lambda: title(worker) == expected, 60, f"title {expected!r}")
    jid = push(client, "Sleep", [30])
    wait_for(lambda: record.has("start", jid, worker.pid), 60, "the job to start")
    expected = f"rfetch {__version__} titletag [1 of 3 busy]"
    wait_for(lambda: title(worker) == expected, 60, f"title {expected!r}")

    worker.signal(signal.SIGTSTP)
    wait_for(lambda: title(worker) == f"{expected} quiet", 60, f"title {expected + ' quiet'!r}")
    stop(worker)


# -- queue order -------------------------------------------------------------------------------


def test_strict_queues_drain_in_order_and_int_behaves_like_term(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    low = [push(client, "Noop", [n], "low") for n in range(3)]
    high = [push(client, "Noop", [n], "high") for n in range(3)]
    sleeper = push(client, "Sleep", [30], "low")
    raw = payload_of(r, "low", sleeper)
    worker = start_worker("-q", "high", "-q", "low", "-c", "1", "-t", "1")
    ident = worker.identity(r)
    wait_for(lambda: record.has("start", sleeper, worker.pid), 60, "the last low job to start")
    assert record.done_order() == high + low, "high is drained before low, each in FIFO order"

    elapsed = stop(worker, signal.SIGINT)
    assert elapsed < EXIT_WAIT, f"exit took {elapsed:.2f} s with -t 1"
    assert lrange(r, "queue:low") == [raw]
    assert r.llen("queue:high") == 0
    assert all_private_lists(r) == {}
    assert not r.sismember("processes", ident)


def test_weighted_queues_interleave_and_favour_the_heavier(
    start_worker: StartWorker, r: redis.Redis, client: Client, record: Record
) -> None:
    count = 200
    high = set(client.push_bulk("testjobs.Noop", [[n] for n in range(count)], {"queue": "high"}))
    low = set(client.push_bulk("testjobs.Noop", [[n] for n in range(count)], {"queue": "low"}))
    worker = start_worker("-q", "high,3", "-q", "low,1", "-c", "1", "-t", "1")
    wait_for(lambda: len(record.done_order()) == 2 * count, 30, "every job to run")
    stop(worker)

    order = record.done_order()
    assert set(order) == high | low
    last_high = max(i for i, jid in enumerate(order) if jid in high)
    first_low = min(i for i, jid in enumerate(order) if jid in low)
    # Weighted random order, not strict: low is not starved until high is empty. With
    # high first in 3 of 4 fetches, about 75 of the first 100 jobs are high (strict: 100,
    # equal weights: 50); a simulation of 20,000 runs never went below 58.
    assert first_low < last_high
    assert 50 < sum(jid in high for jid in order[:100]) < 100


# -- Redis outage ------------------------------------------------------------------------------


def clients_of(server: RedisServer) -> tuple[redis.Redis, Client]:
    """A Redis client of ``server`` (5 s socket timeout) and an rfetch client on it."""
    r = server.client(socket_timeout=5)
    return r, Client(Config(redis_url=server.url), r)


def restart_redis(server: RedisServer, down_until: Callable[[], bool], what: str) -> None:
    """Stop the server gracefully, wait until ``down_until()`` holds (for 20 s at most),
    start it again on the same port and directory (the AOF brings the data back)."""
    server.stop()
    try:
        wait_for(down_until, 20, what)
    finally:
        server.start()


def test_worker_survives_a_redis_restart_without_losing_jobs(
    start_worker: StartWorker, own_redis: RedisServer, record: Record
) -> None:
    r, client = clients_of(own_redis)
    worker = start_worker("-c", "2", "-t", "5", server=own_redis)
    ident = worker.identity(r)
    before = [push(client, "Noop", [n]) for n in range(5)]
    wait_for(lambda: all(record.has("done", jid) for jid in before), 60, "the first jobs")
    # Earlier jobs held at the outage: two jobs running across it (finishing while Redis
    # is down). They may run again (see the xfail test below) but must not be lost.
    sleepers = [push(client, "Sleep", [1.5]) for _ in range(2)]
    wait_for(
        lambda: all(record.has("start", jid, worker.pid) for jid in sleepers),
        10,
        "the sleepers to start",
    )
    r.close()

    # Down until the sleepers have finished and the worker has seen the outage in its fetch
    # and in its heartbeat.
    restart_redis(
        own_redis,
        lambda: all(record.has("done", jid) for jid in sleepers)
        and "fetch failed, Redis unreachable" in worker.log()
        and "heartbeat failed, Redis unreachable" in worker.log(),
        "the sleepers to finish and the worker to see the outage",
    )
    assert worker.proc.poll() is None, worker.log()

    r, client = clients_of(own_redis)
    after = [push(client, "Noop", [n]) for n in range(5)]
    everything = [*before, *sleepers, *after]
    assert len(everything) == 12
    wait_for(lambda: set(everything) <= set(record.done_order()), 20, "every job to run")
    wait_for(lambda: r.llen("queue:default") == 0, 60, "an empty queue")
    wait_for(lambda: "heartbeat recovered after" in worker.log(), 60, "the heartbeat to beat again")
    stop(worker)

    log = worker.log()
    assert log.count("fetch failed, Redis unreachable") == 1, log
    assert log.count("heartbeat failed, Redis unreachable") == 1, log
    assert log.count("fetch recovered after") == 1, log
    assert "heartbeat recovered after" in log
    runs = record.done_order()
    assert set(runs) == set(everything), "no job lost"
    assert int(r.get("stat:processed") or 0) == len(runs), "stats count every run"
    assert r.llen("queue:default") == 0
    assert all_private_lists(r) == {}
    assert not r.sismember("processes", ident)
    r.close()


def test_job_finishing_during_a_redis_outage_is_not_run_again(
    start_worker: StartWorker, own_redis: RedisServer, record: Record
) -> None:
    r, client = clients_of(own_redis)
    worker = start_worker("-c", "2", "-t", "5", server=own_redis)
    jid = push(client, "Sleep", [1.5])
    wait_for(lambda: record.has("start", jid, worker.pid), 60, "the job to start")
    r.close()
    # Down until the job has finished: it finishes while Redis is down.
    restart_redis(own_redis, lambda: record.has("done", jid), "the job to finish")
    assert record.has("done", jid)

    r, client = clients_of(own_redis)
    marker = push(client, "Noop", [])
    wait_for(lambda: record.has("done", marker), 60, "a job pushed after the restart")
    wait_for(lambda: hash_field(r, worker.identity(r), "busy") == "0", 60, "an idle worker")
    stop(worker)
    starts = [j for event, j, _ in record.events() if event == "start"]
    assert starts == [jid], "the job ran once"
    assert all_private_lists(r) == {}
    r.close()
