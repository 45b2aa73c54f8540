"""Start marks with a real ``rfetch worker``: a thread and an event-loop slot each write the
exact payload of the job they start into ``<identity>:started`` before ``perform`` (what
orphan recovery reads to count only started jobs as possible poison pills), and a clean
stop removes the hash."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, cast

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from rfetch.worker.started import StartMarks
from rfetch.worker.unit import UnitOfWork
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess

KEYS = Keys()


def test_a_worker_marks_each_job_it_starts_and_drops_the_marks_at_stop(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    # -t 1: the stop pushes both 30 s jobs back after 1 s (as after the default 25 s).
    worker = WorkerProcess(
        redis_server.url, ["-c", "2", "-t", "1", "-r", "testjobs", "-r", "async_jobs"],
        FAST_ENV, tmp_path,
    )
    try:
        identity = worker.identity(r)
        client = Client(Config(redis_url=redis_server.url), r)
        client.push("testjobs.Sleep", [30])
        client.push("async_jobs.Waits", [30])
        private = KEYS.private(identity, "default")
        wait_for(lambda: r.llen(private) == 2, 20, worker.log)
        held = set(r.lrange(private, 0, -1))  # type: ignore[arg-type]

        def marked() -> bool:
            marks: dict[bytes, bytes] = r.hgetall(KEYS.started(identity))  # type: ignore[assignment]
            return set(marks.values()) == held

        wait_for(marked, 20, worker.log)
        fields = {f.decode()[0] for f in r.hkeys(KEYS.started(identity))}  # type: ignore[union-attr]
        assert fields == {"t", "a"}  # one thread's mark, one loop slot's
    finally:
        assert worker.stop(30) == 0
    assert not r.exists(KEYS.started(identity))


def test_marks_go_on_after_redis_closes_their_connection(r: redis.Redis) -> None:
    """The marks' connection gets no replies (``CLIENT REPLY OFF``); one Redis closed is
    seen (it turns readable) and opened again, so the next mark is written."""
    marks = StartMarks(r, KEYS, "host:1:marks")
    unit = UnitOfWork("default", b'{"jid":"one"}', "private", None, cast("Any", None))
    marks.mark("t1", unit)
    wait_for(lambda: r.hget(KEYS.started("host:1:marks"), "t1") == unit.raw, 10)
    clients: list[dict[str, Any]] = r.client_list()  # type: ignore[assignment]
    [victim] = [c for c in clients if c.get("cmd") == "hset"]
    r.client_kill_filter(_id=victim["id"])
    wait_for(lambda: all(c["id"] != victim["id"] for c in r.client_list()), 10)
    again = UnitOfWork("default", b'{"jid":"two"}', "private", None, cast("Any", None))
    marks.mark("t1", again)
    wait_for(lambda: r.hget(KEYS.started("host:1:marks"), "t1") == again.raw, 10)
    marks.close()


def test_marks_from_many_threads_at_once_all_land(r: redis.Redis) -> None:
    """Threads mark at once on the one connection (its socket checked outside the lock,
    written under it): no command is torn, each slot ends with its thread's last job."""
    marks = StartMarks(r, KEYS, "host:1:many")
    key = KEYS.started("host:1:many")

    def run(slot: int) -> None:
        for n in range(300):
            unit = UnitOfWork("default", b'{"jid":"%d-%d"}' % (slot, n), "private", None,
                              cast("Any", None))
            marks.mark(f"t{slot}", unit)

    threads = [threading.Thread(target=run, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    last = {f"t{slot}".encode(): b'{"jid":"%d-299"}' % slot for slot in range(8)}
    wait_for(lambda: r.hgetall(key) == last, 20, lambda: f"marks: {r.hgetall(key)!r}")
    marks.close()


def unit_of(jid: str) -> UnitOfWork:
    return UnitOfWork("default", b'{"jid":"%s"}' % jid.encode(), "private", None,
                      cast("Any", None))


def test_jobs_handed_to_idle_threads_are_marked_in_one_write_under_lent_slots(
    r: redis.Redis,
) -> None:
    """The fetcher marks the jobs idle threads take at once (one HSET, a hand-off slot
    each); their threads do not mark them again; a job pushed back unstarted loses its
    mark before its slot is lent again; an ended job's slot is lent again."""
    marks = StartMarks(r, KEYS, "host:1:handed", 2)
    key = KEYS.started("host:1:handed")
    first, second, third = unit_of("a"), unit_of("b"), unit_of("c")
    marks.handed([first, second, third])  # two slots: the third is left to its thread
    wait_for(lambda: r.hgetall(key) == {b"f0": first.raw, b"f1": second.raw}, 10,
             lambda: f"marks: {r.hgetall(key)!r}")
    marks.mark("t1", first)  # marked already: no write
    marks.mark("t2", third)
    wait_for(lambda: r.hget(key, "t2") == third.raw, 10)
    assert r.hlen(key) == 3
    marks.unstarted([second])  # pushed back: its mark goes, its slot is free
    wait_for(lambda: not r.hexists(key, "f1"), 10)
    marks.ended(first)
    fourth, fifth = unit_of("d"), unit_of("e")
    marks.handed([fourth, fifth])  # both slots free again
    wait_for(lambda: set(r.hvals(key)) == {fourth.raw, fifth.raw, third.raw}, 10,  # type: ignore[arg-type]
             lambda: f"marks: {r.hgetall(key)!r}")
    marks.close()


def test_a_sync_worker_marks_jobs_for_idle_threads_before_they_start(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """Without async job classes, a job is marked before it runs: by the fetcher under a
    hand-off slot (``f...``) when it went to an idle thread, else by its thread (``t...``,
    as a job the blocking fetch brings to an idle worker)."""
    worker = WorkerProcess(redis_server.url, ["-c", "2", "-r", "testjobs"], FAST_ENV, tmp_path)
    try:
        identity = worker.identity(r)
        client = Client(Config(redis_url=redis_server.url), r)
        client.push("testjobs.Sleep", [30])
        private = KEYS.private(identity, "default")
        wait_for(lambda: r.llen(private) == 1, 20, worker.log)
        [held] = r.lrange(private, 0, -1)  # type: ignore[misc]
        wait_for(lambda: held in r.hvals(KEYS.started(identity)), 20, worker.log)  # type: ignore[operator]
        marks: dict[bytes, bytes] = r.hgetall(KEYS.started(identity))  # type: ignore[assignment]
        assert all(field[:1] in (b"f", b"t") for field in marks)  # hand-off or thread slots
    finally:
        assert worker.stop(30) == 0
    assert not r.exists(KEYS.started(identity))


def test_a_job_marked_behind_the_blocking_fetch_is_not_marked_again(r: redis.Redis) -> None:
    """``marked``: Redis wrote the mark under the thread's slot (``mark_fetched.lua``); that
    thread writes nothing for it; pushed back unstarted, its mark is deleted."""
    marks = StartMarks(r, KEYS, "host:1:fetched")
    key = KEYS.started("host:1:fetched")
    job, other = unit_of("a"), unit_of("b")
    r.hset(key, "t1", job.raw)  # what mark_fetched.lua wrote
    marks.marked(job, "t1")
    marks.mark("t1", job)  # no write: the marks' connection is never opened
    clients: list[dict[str, Any]] = r.client_list()  # type: ignore[assignment]
    assert not [c for c in clients if c.get("cmd") in ("hset", "client|reply")]
    marks.marked(other, "t2")
    r.hset(key, "t2", other.raw)
    marks.unstarted([other])
    wait_for(lambda: not r.hexists(key, "t2"), 10)
    assert r.hget(key, "t1") == job.raw
    marks.close()


def test_an_idle_worker_of_one_queue_has_redis_mark_the_job_it_blocks_for(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """The job an idle thread's BLMOVE brings is marked by ``mark_fetched.lua``, pipelined
    behind the BLMOVE: under that thread's slot, before ``perform``, and the worker sends no
    mark of its own for it."""
    worker = WorkerProcess(redis_server.url, ["-c", "2", "-t", "1", "-r", "testjobs"], FAST_ENV,
                           tmp_path)
    try:
        identity = worker.identity(r)
        wait_for(lambda: any(c.get("cmd") == "blmove" for c in r.client_list()), 20,
                 worker.log)  # type: ignore[union-attr]
        r.config_resetstat()
        Client(Config(redis_url=redis_server.url), r).push("testjobs.Sleep", [30])
        private = KEYS.private(identity, "default")
        wait_for(lambda: r.llen(private) == 1, 20, worker.log)
        [held] = r.lrange(private, 0, -1)  # type: ignore[misc]
        wait_for(lambda: "Sleep" in worker.log() and "start" in worker.log(), 20, worker.log)
        marks: dict[bytes, bytes] = r.hgetall(KEYS.started(identity))  # type: ignore[assignment]
        assert [field[:1] for field, raw in marks.items() if raw == held] == [b"t"]
        stats: dict[str, Any] = r.info("commandstats")  # type: ignore[assignment]
        # The thread wrote no mark of its own: the marks' connection (which says CLIENT REPLY
        # OFF when it opens, at its first mark) was never opened.
        assert "cmdstat_client|reply" not in stats
        assert stats["cmdstat_fcall"]["calls"] >= 1
    finally:
        assert worker.stop(30) == 0


def test_mark_fetched_marks_the_first_left_end_job_not_marked_yet(r: redis.Redis) -> None:
    """``mark_fetched.lua``: the private lists in queue order; a left-end job marked under
    any slot (a running job) is passed over; none left: nil, nothing written."""
    commands = Commands(r, KEYS)
    started = KEYS.started("host:1:lua")
    lists = [KEYS.private("host:1:lua", q) for q in ("a", "b", "c")]

    def mark() -> Any:
        return r.execute_command(*commands.mark_fetched_command(lists, started, "t9"))

    assert mark() is None and not r.exists(started)  # every list empty
    r.lpush(lists[0], b"running")
    r.hset(started, "t1", b"running")  # a job another thread runs
    r.lpush(lists[2], b"new")
    assert mark() == b"new"
    assert r.hgetall(started) == {b"t1": b"running", b"t9": b"new"}
    assert mark() is None  # marked now: nothing left to mark, nothing changed
    assert r.hgetall(started) == {b"t1": b"running", b"t9": b"new"}


def test_a_wake_up_brings_a_job_marked_by_redis_to_a_worker_of_several_queues(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """The fetch a wake-up appends behind the BLMOVE of an idle worker of several queues is
    followed by ``mark_fetched.lua``: the job pushed to its third queue is marked under the
    thread's slot, and the worker sends no mark of its own."""
    # A long block: between two blocking fetches the worker looks for jobs itself (EXISTS,
    # then a fetch whose jobs the fetcher marks), which is not the path tested here.
    worker = WorkerProcess(
        redis_server.url, ["-c", "2", "-t", "1", "-q", "first", "-q", "second", "-q", "third",
                           "-r", "testjobs"],
        {**FAST_ENV, "RFETCH_BLOCK_TIMEOUT": "20", "RFETCH_NETWORK_TIMEOUT": "30"}, tmp_path)
    try:
        identity = worker.identity(r)

        def settled() -> bool:
            """Subscribed, and one BLMOVE blocked for a second (after the wake-up that the
            subscription itself counts)."""
            clients: list[dict[str, Any]] = r.client_list()  # type: ignore[assignment]
            return any(c.get("cmd") == "subscribe" for c in clients) and any(
                c.get("cmd") == "blmove" and "b" in c.get("flags", "")
                and int(c.get("idle", 0)) >= 1 for c in clients)

        wait_for(settled, 30, worker.log)
        r.config_resetstat()
        Client(Config(redis_url=redis_server.url), r).push(
            "testjobs.Sleep", [30], {"queue": "third"})
        private = KEYS.private(identity, "third")
        wait_for(lambda: r.llen(private) == 1, 20, worker.log)
        [held] = r.lrange(private, 0, -1)  # type: ignore[misc]
        wait_for(lambda: held in r.hvals(KEYS.started(identity)), 20, worker.log)  # type: ignore[operator]
        marks: dict[bytes, bytes] = r.hgetall(KEYS.started(identity))  # type: ignore[assignment]
        assert [field[:1] for field, raw in marks.items() if raw == held] == [b"t"]
        stats: dict[str, Any] = r.info("commandstats")  # type: ignore[assignment]
        assert "cmdstat_client|reply" not in stats  # the marks' connection never opened
    finally:
        assert worker.stop(30) == 0
