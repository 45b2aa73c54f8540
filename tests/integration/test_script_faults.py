"""A key of the wrong type on a job's way never loses the job: every Lua script that moves a
job checks the keys it may write before its first write (``lib/guard.lua``), because Redis
does not roll back a script that errors half-way. One test per script family, against the
real session redis-server: the destination is made a key of another type, the job is still
exactly where it was, nothing else changed, and what rfetch logs is true."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest
import redis

from rfetch.config import Config, QueueSpec
from rfetch.jobs.payload import Routing
from rfetch.push.client import Client
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from rfetch.worker.context import WorkerContext
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.launcher import Launcher
from rfetch.worker.registry import Registry
from rfetch.worker.scheduled import Poller
from tests.support.redis_server import RedisServer

IDENTITY = "testhost:4242:0123456789ab"
DEAD = "host:111:aaaaaaaaaaaa"
KEYS = Keys()
PRIVATE = KEYS.private(IDENTITY, "q")


def job(jid: str, **fields: object) -> bytes:
    return json.dumps({"class": "X", "args": [], "jid": jid, "queue": "q", **fields}).encode()


def snapshot(r: redis.Redis) -> dict[bytes, object]:
    """Every key with its type and content, to show that nothing changed."""
    out: dict[bytes, object] = {}
    for key in r.scan_iter():
        kind = r.type(key)
        if kind == b"list":
            out[key] = r.lrange(key, 0, -1)
        elif kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            out[key] = r.hgetall(key)
        elif kind == b"set":
            out[key] = r.smembers(key)
        else:
            out[key] = r.get(key)
    return out


def refused(call: Callable[[], object]) -> str:
    """The message of the ResponseError ``call`` raises (checked after the state)."""
    with pytest.raises(redis.ResponseError) as caught:
        call()
    return str(caught.value)


@pytest.fixture
def commands(r: redis.Redis) -> Commands:
    return Commands(r, KEYS)


@pytest.fixture
def fetch(config: Config, commands: Commands) -> ReliableFetch:
    return ReliableFetch(
        WorkerContext.build(config.replace(queues=(QueueSpec("q"),)), commands.redis, IDENTITY)
    )


# -- settle.lua: the retry and dead sets -------------------------------------------------------


@pytest.mark.parametrize("zset", ["retry", "dead"])
def test_settle_into_a_set_of_another_type_keeps_the_job_in_the_private_list(
    fetch: ReliableFetch, r: redis.Redis, zset: str
) -> None:
    raw = job("a")
    r.lpush(PRIVATE, raw)
    r.set(zset, "not a sorted set")
    before = snapshot(r)
    message = refused(lambda: fetch.settle(fetch.unit("q", raw), zset, 1.0, job("a")))
    assert snapshot(r) == before  # the job is still in the private list
    assert f"WRONGTYPE {zset} is a string" in message


def test_settle_of_a_keyed_job_whose_next_job_cannot_go_out_changes_nothing(
    fetch: ReliableFetch, r: redis.Redis
) -> None:
    raw, waiting = job("a", ordering_key="k"), job("b", ordering_key="k")
    r.lpush(PRIVATE, raw)
    r.hset(KEYS.key_holders("q"), "k", "a")
    r.lpush(KEYS.key_list("q", "k"), waiting)
    r.hset(KEYS.queue("q"), "x", "not a list")  # where the released key's next job goes
    before = snapshot(r)
    message = refused(lambda: fetch.settle(fetch.unit("q", raw), KEYS.dead, 1.0, raw))
    assert snapshot(r) == before
    assert "WRONGTYPE queue:q is a hash" in message


def test_settle_with_a_score_that_is_not_a_number_changes_nothing(
    commands: Commands, r: redis.Redis
) -> None:
    raw = job("a")
    r.lpush(PRIVATE, raw)
    message = refused(
        lambda: commands.settle(PRIVATE, "q", raw, KEYS.retry, float("nan"), raw, None)
    )
    assert r.lrange(PRIVATE, 0, -1) == [raw]
    assert r.exists(KEYS.retry) == 0
    assert "not a number" in message


# -- requeue.lua: push-back at shutdown, quiet, pause ------------------------------------------


def test_push_back_to_a_queue_of_another_type_leaves_the_job_and_says_so(
    fetch: ReliableFetch, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    plain, tenant = job("a"), job("t", tenant="acme")
    r.lpush(PRIVATE, plain, tenant)
    r.set(KEYS.queue("q"), "not a list")
    with caplog.at_level(logging.INFO, "rfetch"):
        pushed = fetch.requeue([fetch.unit("q", plain), fetch.unit("q", tenant)])
    assert pushed == 1  # the tenant job's way (its tenant list) is fine
    assert r.lrange(PRIVATE, 0, -1) == [plain]
    assert r.lrange(KEYS.fair_tenant("q", "acme"), 0, -1) == [tenant]
    assert r.get(KEYS.queue("q")) == b"not a list"
    [line] = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert "1 job(s) of queue q NOT pushed back" in line
    assert f"stay in the private list {PRIVATE}" in line
    assert "WRONGTYPE queue:q is a string" in line


def test_push_back_of_a_keyed_job_whose_key_list_is_of_another_type_leaves_it(
    fetch: ReliableFetch, r: redis.Redis
) -> None:
    raw = job("b", ordering_key="k")
    r.lpush(PRIVATE, raw)
    r.hset(KEYS.key_holders("q"), "k", "a")  # another job holds the key: b waits in its list
    r.sadd(KEYS.key_list("q", "k"), "not a list")
    before = snapshot(r)
    assert fetch.requeue([fetch.unit("q", raw)]) == 0
    assert snapshot(r) == before


# -- recover.lua: orphan recovery --------------------------------------------------------------


def test_recovery_into_a_queue_of_another_type_leaves_the_orphan_and_retries_later(
    r: redis.Redis, redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    config = Config(redis_url=redis_server.url, heartbeat_interval=0.2, heartbeat_ttl=1)
    recovery = Launcher(config, Registry([]), redis=r, identity="me:1:bbbbbbbbbbbb").recovery
    dead_private = KEYS.private(DEAD, "default")
    raw = job("a", queue="default")
    r.lpush(dead_private, raw)
    r.hset(KEYS.identities, DEAD, json.dumps(["default"]))
    r.sadd(KEYS.queue("default"), "not a list")
    with caplog.at_level(logging.INFO, "rfetch"):
        assert recovery.reap(DEAD, ["default"]) == 0
    assert r.lrange(dead_private, 0, -1) == [raw]
    assert r.smembers(KEYS.queue("default")) == {b"not a list"}
    assert r.exists(KEYS.recoveries("a")) == 0  # not counted: it did not go back
    assert r.hexists(KEYS.identities, DEAD)  # still known: the next check tries again
    text = caplog.text
    assert f"stays in its private list {dead_private}" in text
    assert "WRONGTYPE queue:default is a set" in text
    assert "reaped" not in text

    r.delete(KEYS.queue("default"))  # the key is fixed
    assert recovery.reap(DEAD, ["default"]) == 1
    assert r.lrange(KEYS.queue("default"), 0, -1) == [raw]


# -- finish.lua and fetch.lua: acknowledging a keyed job releases its key ----------------------


def test_ack_of_a_holder_whose_next_job_cannot_go_out_changes_nothing(
    commands: Commands, r: redis.Redis
) -> None:
    raw, waiting = job("a", ordering_key="k"), job("b", ordering_key="k", tenant="acme")
    r.lpush(PRIVATE, raw)
    r.hset(KEYS.key_holders("q"), "k", "a")
    r.lpush(KEYS.key_list("q", "k"), waiting)
    r.set(KEYS.fair_tenant("q", "acme"), "not a list")  # the next job's tenant list
    before = snapshot(r)
    routing = Routing.parse(raw)
    assert routing is not None
    message = refused(lambda: commands.finish(PRIVATE, "q", raw, routing))
    assert snapshot(r) == before  # the job is not acknowledged, its next job still waits
    assert "WRONGTYPE rfetch:fair:q|acme is a string" in message


def test_fetch_acknowledges_a_holder_and_keeps_its_key_when_the_next_job_cannot_go_out(
    commands: Commands, r: redis.Redis
) -> None:
    raw, waiting, other = job("a", ordering_key="k"), job("b", ordering_key="k"), job("c")
    r.lpush(PRIVATE, raw)
    r.hset(KEYS.key_holders("q"), "k", "a")
    r.lpush(KEYS.key_list("q", "k"), waiting)
    r.lpush(KEYS.queue("p"), other)
    r.set(KEYS.queue("q"), "not a list")
    names = ["p", "q"]
    reply = commands.fetch(
        names,
        {n: KEYS.queue(n) for n in names},
        {n: KEYS.private(IDENTITY, n) for n in names},
        1,
        10,
        [],
        [Finished("q", raw)],
    )
    assert [raw_ for _, raw_ in reply.jobs] == [other]  # the other queues go on
    assert r.llen(PRIVATE) == 0  # the finished job is acknowledged
    assert r.hget(KEYS.key_holders("q"), "k") == b"a"  # the key stays held...
    assert r.lrange(KEYS.key_list("q", "k"), 0, -1) == [waiting]  # ...its next job waits


class Finished:
    """A stand-in for a finished unit of work, as the fetch acknowledges it."""

    def __init__(self, queue: str, raw: bytes) -> None:
        self.queue, self.raw, self.routing = queue, raw, Routing.parse(raw)


# -- rescue.lua: stuck-key rescue --------------------------------------------------------------


def test_rescue_of_a_key_whose_next_job_cannot_go_out_changes_nothing(
    commands: Commands, r: redis.Redis
) -> None:
    waiting = job("b", ordering_key="k")
    r.hset(KEYS.key_holders("q"), "k", "a")
    r.zadd(KEYS.key_leases("q"), {"a:k": 1.0})  # expired long ago
    r.lpush(KEYS.key_list("q", "k"), waiting)
    r.set(KEYS.queue("q"), "not a list")
    before = snapshot(r)
    message = refused(lambda: commands.rescue("q", "k", "a", 0.0))
    assert snapshot(r) == before
    assert "WRONGTYPE queue:q is a string" in message


# -- api_move.lua: admin actions on the sorted sets ---------------------------------------------


@pytest.mark.parametrize(
    ("mode", "broken"), [("queue", "queue:q"), ("dead", "dead")]
)
def test_admin_move_to_a_key_of_another_type_keeps_the_entry(
    commands: Commands, r: redis.Redis, mode: str, broken: str
) -> None:
    raw = job("a")
    r.zadd(KEYS.retry, {raw: 10.0})
    r.hset(broken, "x", "not the right type")
    before = snapshot(r)
    pipe = r.pipeline(transaction=True)
    commands.api_move(pipe, KEYS.retry, mode, raw, raw, None, queue="q", score=5.0)  # type: ignore[arg-type]
    message = refused(pipe.execute)
    assert snapshot(r) == before  # still in the retry set
    assert f"WRONGTYPE {broken} is a hash" in message


# -- enqueue_due.lua: the scheduled poller -------------------------------------------------------


def test_due_jobs_whose_queue_is_of_another_type_stay_scheduled_and_the_others_move(
    config: Config, commands: Commands, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = [job(f"s{i}", queue="broken") for i in range(3)]
    fine = job("f", queue="q")
    r.zadd(KEYS.schedule, {raw: 1.0 + i for i, raw in enumerate(stuck)})
    r.zadd(KEYS.schedule, {fine: 9.0})  # behind the stuck ones
    r.set(KEYS.queue("broken"), "not a list")
    poller = Poller(WorkerContext.build(config, commands.redis, IDENTITY))
    with caplog.at_level(logging.INFO, "rfetch"):
        assert poller.enqueue_due() == 1
    assert [m for m, _ in r.zrange(KEYS.schedule, 0, -1, withscores=True)] == stuck
    [queued] = r.lrange(KEYS.queue("q"), 0, -1)
    assert json.loads(queued)["jid"] == "f"
    assert r.get(KEYS.queue("broken")) == b"not a list"
    assert "3 due job(s) of schedule stay in the set, not enqueued" in caplog.text
    assert "WRONGTYPE queue:broken is a string" in caplog.text


# -- push.lua: the client -----------------------------------------------------------------------


def test_a_unique_push_refused_for_a_key_type_leaves_no_lock_behind(
    config: Config, r: redis.Redis
) -> None:
    client = Client(config, r)
    r.set(KEYS.queue("q"), "not a list")
    message = refused(lambda: client.push("X", [1], {"queue": "q", "unique_for": 60}))
    assert set(r.keys("*")) == {KEYS.queue("q").encode()}  # no lock, no queues entry
    assert "WRONGTYPE queue:q is a string" in message
    r.delete(KEYS.queue("q"))
    assert client.push("X", [1], {"queue": "q", "unique_for": 60}) is not None  # not "a duplicate"
    assert r.llen(KEYS.queue("q")) == 1


# -- coalesce.lua: taking a key's waiting jobs ---------------------------------------------------


def test_coalescing_into_a_private_list_of_another_type_takes_nothing(
    commands: Commands, r: redis.Redis
) -> None:
    waiting = [job("b", ordering_key="k"), job("c", ordering_key="k")]
    r.hset(KEYS.key_holders("q"), "k", "a")
    r.lpush(KEYS.key_list("q", "k"), *waiting)
    r.set(PRIVATE, "not a list")
    before = snapshot(r)
    message = refused(lambda: commands.coalesce(PRIVATE, "q", "k", "a", 10))
    assert snapshot(r) == before  # every waiting job still in the key's list
    assert "WRONGTYPE" in message


# -- periodic_push.lua: a periodic schedule's tick ----------------------------------------------


def test_a_tick_whose_queue_is_of_another_type_is_not_marked_pushed(
    commands: Commands, r: redis.Redis
) -> None:
    seconds, _ = r.time()
    tick = int(seconds) - 1
    r.hset(KEYS.leader, "token", "tok")
    r.set(KEYS.queue("q"), "not a list")
    before = snapshot(r)
    message = refused(
        lambda: commands.periodic_push("tok", "nightly", tick, 60.0, 120, "q", "j", b"{}", False)
    )
    assert snapshot(r) == before  # no marker, cursor unmoved: the tick is tried again
    assert "WRONGTYPE queue:q is a string" in message
    r.delete(KEYS.queue("q"))
    assert commands.periodic_push("tok", "nightly", tick, 60.0, 120, "q", "j", b"{}", False) == (
        "pushed"
    )
    assert r.lrange(KEYS.queue("q"), 0, -1) == [b"{}"]
