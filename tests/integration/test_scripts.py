"""The Lua scripts in ``rfetch/lua/`` and the ReliableFetch calls built on them, against the
real session redis-server. Each test sets up keys by hand, runs one script (through
``rfetch.store.commands.Commands``) and checks every key it may touch."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
import redis

from rfetch.config import Config, QueueSpec
from rfetch.jobs.payload import Routing, loads
from rfetch.push.client import Client
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from rfetch.worker.context import WorkerContext
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.scheduled import BATCH, Poller

IDENTITY = "testhost:4242:0123456789ab"
KEYS = Keys()


def private(queue: str) -> str:
    return KEYS.private(IDENTITY, queue)


@pytest.fixture
def scripts(r: redis.Redis) -> Commands:
    return Commands(r, KEYS)


@dataclass(frozen=True)
class Ack:
    """A finished plain job, as the fetch acknowledges it."""

    queue: str
    raw: bytes
    routing: Routing | None = None


def poller(config: Config, r: redis.Redis) -> Poller:
    return Poller(WorkerContext.build(config, r, IDENTITY))


def redis_now(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1_000_000


def lrange(r: redis.Redis, key: str) -> list[bytes]:
    return r.lrange(key, 0, -1)  # type: ignore[return-value]


def run_order(r: redis.Redis, key: str) -> list[bytes]:
    """A list's items in the order consumers take them (right end first)."""
    return lrange(r, key)[::-1]


# -- fetch.lua ------------------------------------------------------------------------------


def fetch(
    scripts: Commands,
    r: redis.Redis,
    queues: Sequence[str],
    limit: int,
    fetch_pairs: int | None = None,
    acks: Sequence[tuple[int, bytes]] = (),
) -> list[tuple[int, bytes]]:
    reply = scripts.fetch(
        queues,
        {q: KEYS.queue(q) for q in queues},
        {q: private(q) for q in queues},
        len(queues) if fetch_pairs is None else fetch_pairs,
        limit,
        [],
        [Ack(queues[pair - 1], raw) for pair, raw in acks],
    )
    # (pair, payload) of each job moved, pairs counted from 1.
    return [(i + 1, raw) for i, raw in reply.jobs]


def test_fetch_moves_oldest_first_across_queues_in_the_given_order(
    scripts: Commands, r: redis.Redis
) -> None:
    r.lpush("queue:a", b"a1", b"a2", b"a3")  # a1 is the oldest (right end)
    r.lpush("queue:b", b"b1", b"b2")

    got = fetch(scripts, r, ["a", "b"], 4)
    assert got == [(1, b"a1"), (1, b"a2"), (1, b"a3"), (2, b"b1")]
    assert lrange(r, "queue:a") == []
    assert lrange(r, "queue:b") == [b"b2"]
    # LMOVE RIGHT LEFT, as super_fetch: the private list holds the newest fetched on the left.
    assert lrange(r, private("a")) == [b"a3", b"a2", b"a1"]
    assert lrange(r, private("b")) == [b"b1"]


def test_fetch_follows_the_order_it_is_given(scripts: Commands, r: redis.Redis) -> None:
    r.lpush("queue:a", b"a1", b"a2")
    r.lpush("queue:b", b"b1", b"b2")
    assert fetch(scripts, r, ["b", "a"], 3) == [(1, b"b1"), (1, b"b2"), (2, b"a1")]
    assert lrange(r, "queue:a") == [b"a2"]


def test_fetch_skips_empty_queues_and_stops_at_the_limit(scripts: Commands, r: redis.Redis) -> None:
    r.lpush("queue:c", *[f"c{i}".encode() for i in range(10)])
    assert fetch(scripts, r, ["a", "b", "c"], 2) == [(3, b"c0"), (3, b"c1")]
    assert r.llen("queue:c") == 8
    assert fetch(scripts, r, ["a", "b", "c"], 0) == []
    assert r.llen("queue:c") == 8
    assert r.llen(private("c")) == 2


def test_fetch_takes_only_from_the_first_pairs(scripts: Commands, r: redis.Redis) -> None:
    r.lpush("queue:a", b"a1")
    r.lpush("queue:paused", b"p1")
    assert fetch(scripts, r, ["a", "paused"], 5, fetch_pairs=1) == [(1, b"a1")]
    assert lrange(r, "queue:paused") == [b"p1"]
    assert r.exists(private("paused")) == 0


def test_fetch_acknowledges_exact_bytes_once_before_fetching(
    scripts: Commands, r: redis.Redis
) -> None:
    r.rpush(private("a"), b"x", b"y", b"x")
    r.rpush(private("b"), b"x")
    r.lpush("queue:a", b"new")
    got = fetch(scripts, r, ["a", "b"], 1, acks=[(1, b"x"), (1, b"y"), (1, b"nope"), (2, b"x ")])
    assert got == [(1, b"new")]
    # One copy of "x" removed from a's list (not b's), "y" removed, the others untouched.
    assert lrange(r, private("a")) == [b"new", b"x"]
    assert lrange(r, private("b")) == [b"x"]


def test_concurrent_fetches_take_every_job_exactly_once(r: redis.Redis, config: Config) -> None:
    jobs = [f"job-{i}".encode() for i in range(600)]
    r.lpush("queue:a", *jobs)
    results: dict[int, list[bytes]] = {}
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        client = redis.Redis.from_url(config.redis_url)
        try:
            own = Commands(client, KEYS)
            taken: list[bytes] = []
            public = {"a": KEYS.queue("a")}
            mine = {"a": KEYS.private(f"h:{n}:0123456789ab", "a")}
            while True:
                reply = own.fetch(["a"], public, mine, 1, 7, [], [])
                if not reply.jobs:
                    break
                taken += [raw for _, raw in reply.jobs]
            results[n] = taken
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    taken = [raw for n in sorted(results) for raw in results[n]]
    assert sorted(taken) == sorted(jobs)  # nothing lost, nothing taken twice
    for n, own_taken in results.items():
        assert lrange(r, KEYS.private(f"h:{n}:0123456789ab", "a"))[::-1] == own_taken
    assert r.llen("queue:a") == 0


# -- requeue.lua ----------------------------------------------------------------------------


def requeue(scripts: Commands, r: redis.Redis, queue: str, raws: Sequence[bytes]) -> int:
    return scripts.requeue(private(queue), queue, [(raw, None) for raw in raws]).pushed


def test_requeue_pushes_back_only_held_jobs_to_the_head_in_order(
    scripts: Commands, r: redis.Redis
) -> None:
    r.lpush(private("q"), b"a", b"b", b"c")
    r.lpush("queue:q", b"older", b"newer")
    assert requeue(scripts, r, "q", [b"a", b"missing", b"c"]) == 2
    # Next to run: a, then c (the order given), then what was already waiting.
    assert run_order(r, "queue:q") == [b"a", b"c", b"older", b"newer"]
    assert lrange(r, private("q")) == [b"b"]
    assert r.smembers("queues") == {b"q"}


def test_requeue_of_nothing_held_changes_nothing(scripts: Commands, r: redis.Redis) -> None:
    r.lpush(private("q"), b"a")
    assert requeue(scripts, r, "q", [b"gone", b"also-gone"]) == 0
    assert r.exists("queue:q", "queues") == 0
    assert lrange(r, private("q")) == [b"a"]


def test_requeue_counts_identical_payloads(scripts: Commands, r: redis.Redis) -> None:
    r.lpush(private("q"), b"same", b"same")
    assert requeue(scripts, r, "q", [b"same", b"same", b"same"]) == 2
    assert lrange(r, "queue:q") == [b"same", b"same"]
    assert r.exists(private("q")) == 0


def test_requeue_re_adds_the_queue_to_queues(scripts: Commands, r: redis.Redis) -> None:
    r.sadd("queues", "other")
    r.lpush(private("q"), b"a")
    assert requeue(scripts, r, "q", [b"a"]) == 1
    assert r.smembers("queues") == {b"other", b"q"}  # Sidekiq #4706


# -- settle.lua -----------------------------------------------------------------------------


def settle(
    scripts: Commands,
    r: redis.Redis,
    raw: bytes,
    zset: str,
    score: float,
    stored: str,
    trim_before: float | None = None,
    cap: int | None = None,
) -> int:
    return int(
        scripts.settle(
            private("q"), "q", raw, zset, score, stored, None, trim_before=trim_before, cap=cap
        )
    )


def test_settle_writes_only_when_the_job_is_still_ours(scripts: Commands, r: redis.Redis) -> None:
    r.lpush(private("q"), b"other", b"raw")
    assert settle(scripts, r, b"raw", "retry", 1234.5, '{"retry_count":0}') == 1
    assert r.zrange("retry", 0, -1, withscores=True) == [(b'{"retry_count":0}', 1234.5)]
    assert lrange(r, private("q")) == [b"other"]

    # Pushed back (or acknowledged) meanwhile: nothing is written (Sidekiq #4112).
    assert settle(scripts, r, b"raw", "retry", 99.0, '{"retry_count":1}') == 0
    assert r.zcard("retry") == 1
    assert settle(scripts, r, b"raw", "dead", 99.0, "x", trim_before=1.0, cap=5) == 0
    assert r.exists("dead") == 0


def test_settle_trims_dead_entries_older_than_the_cutoff(scripts: Commands, r: redis.Redis) -> None:
    r.zadd("dead", {"d100": 100, "d200": 200, "d250": 250, "d300": 300})
    r.lpush(private("q"), b"raw")
    assert settle(scripts, r, b"raw", "dead", 1000.0, "new", trim_before=250.0) == 1
    assert r.zrange("dead", 0, -1) == [b"d250", b"d300", b"new"]


def test_settle_caps_the_dead_set_keeping_the_newest(scripts: Commands, r: redis.Redis) -> None:
    r.zadd("dead", {f"d{i}": i for i in range(1, 6)})
    r.lpush(private("q"), b"raw")
    assert settle(scripts, r, b"raw", "dead", 10.0, "new", trim_before=0.0, cap=3) == 1
    assert r.zrange("dead", 0, -1) == [b"d4", b"d5", b"new"]


def test_settle_without_limits_trims_nothing(scripts: Commands, r: redis.Redis) -> None:
    r.zadd("retry", {"r1": 1, "r2": 2})
    r.lpush(private("q"), b"raw")
    assert settle(scripts, r, b"raw", "retry", 3.0, "new") == 1
    assert r.zcard("retry") == 3


# -- enqueue_due.lua ------------------------------------------------------------------------


def enqueue_due(
    scripts: Commands, r: redis.Redis, zset: str = "schedule", limit: int = 100, ns: str = ""
) -> int:
    commands = scripts if not ns else Commands(r, Keys(ns.rstrip(":")))
    return commands.enqueue_due(ns + zset, limit).moved


def test_enqueue_due_moves_only_jobs_due_by_redis_time(scripts: Commands, r: redis.Redis) -> None:
    now = redis_now(r)
    past = '{"class":"X","args":[1],"queue":"q","jid":"past"}'
    future = '{"class":"X","args":[2],"queue":"q","jid":"future"}'
    r.zadd("schedule", {past: now - 3600, future: now + 3600})
    assert enqueue_due(scripts, r) == 1
    assert r.zrange("schedule", 0, -1) == [future.encode()]
    [moved] = lrange(r, "queue:q")
    assert json.loads(moved)["jid"] == "past"
    assert r.smembers("queues") == {b"q"}
    assert enqueue_due(scripts, r) == 0


# Payload text with everything a re-serialisation would change: a huge integer, floats whose
# shortest form differs between languages, nested "enqueued_at" keys, a string that contains
# "enqueued_at": and brackets, unicode, escaped quotes and a trailing backslash.
HEAD = (
    '{"retry":true,"queue":"q","class":"Big",'
    '"args":[12345678901234567890,0.1,1e300,-0.0,1.0,'
    '{"enqueued_at":123,"nested":{"enqueued_at":[1,2]}},'
    '"\\"enqueued_at\\":7 {[","é☃ \\u00e9 \\\\ \\"q\\" \\/","\\\\"],'
    '"note":"enqueued_at","jid":"0123456789abcdef01234567","created_at":1700000000.123456'
)
NOW = r"(\d{10}\.\d{6})"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (HEAD + ',"enqueued_at":', "}"),  # Sidekiq's order: enqueued_at last
        (HEAD + ',"enqueued_at": ', ', "tags" : ["a"]}'),  # spaced JSON
        (HEAD + ',"enqueued_at":', ',"x":1}'),
        ('{"enqueued_at":', "," + HEAD[1:] + "}"),  # first key
    ],
)
@pytest.mark.parametrize("old", ["1700000001.5", "1700000001500", "null", "-1e3"])
def test_enqueue_due_sets_enqueued_at_in_place_keeping_every_other_byte(
    scripts: Commands, r: redis.Redis, before: str, after: str, old: str
) -> None:
    original = before + old + after
    parsed_original = json.loads(original)
    t0 = redis_now(r)
    r.zadd("retry", {original: t0 - 10})
    assert enqueue_due(scripts, r, "retry") == 1
    t1 = redis_now(r)
    [moved] = lrange(r, "queue:q")
    text = moved.decode("utf-8")
    match = re.fullmatch(re.escape(before) + NOW + re.escape(after), text)
    assert match, text
    assert t0 <= float(match.group(1)) <= t1
    parsed = json.loads(text)
    assert parsed["args"] == parsed_original["args"]
    assert parsed["args"][0] == 12345678901234567890
    assert parsed["args"][5] == {"enqueued_at": 123, "nested": {"enqueued_at": [1, 2]}}
    assert loads(moved)["enqueued_at"] == float(match.group(1))


def test_enqueue_due_adds_enqueued_at_when_missing(scripts: Commands, r: redis.Redis) -> None:
    original = HEAD + "}"
    t0 = redis_now(r)
    r.zadd("schedule", {original: t0 - 1})
    assert enqueue_due(scripts, r) == 1
    [moved] = lrange(r, "queue:q")
    text = moved.decode("utf-8")
    match = re.fullmatch(r'\{"enqueued_at":' + NOW + "," + re.escape(HEAD[1:] + "}"), text)
    assert match, text
    assert t0 <= float(match.group(1)) <= redis_now(r)
    assert json.loads(text)["enqueued_at"] == float(match.group(1))


def test_enqueue_due_moves_at_most_the_limit_per_call_oldest_first(
    scripts: Commands, r: redis.Redis
) -> None:
    now = redis_now(r)
    r.zadd("schedule", {json.dumps({"class": "X", "queue": "q", "jid": i}): now - 1000 + i
                        for i in range(250)})
    assert enqueue_due(scripts, r, limit=100) == 100
    assert r.zcard("schedule") == 150
    assert [json.loads(raw)["jid"] for raw in run_order(r, "queue:q")] == list(range(100))


def test_poller_moves_more_than_one_batch_from_both_sets(
    scripts: Commands, r: redis.Redis, config: Config
) -> None:
    now = redis_now(r)
    r.zadd("schedule", {json.dumps({"class": "S", "queue": "a", "jid": i}): now - 500 + i
                        for i in range(2 * BATCH + 50)})
    r.zadd("schedule", {json.dumps({"class": "S", "queue": "a", "jid": "later"}): now + 3600})
    r.zadd("retry", {json.dumps({"class": "R", "queue": "b", "jid": i}): now - 500 + i
                     for i in range(BATCH)})
    moved = poller(config, r).enqueue_due()
    assert moved == 3 * BATCH + 50
    assert [json.loads(raw)["jid"] for raw in run_order(r, "queue:a")] == list(
        range(2 * BATCH + 50)
    )
    assert r.llen("queue:b") == BATCH
    assert r.zrange("schedule", 0, -1) == [b'{"class": "S", "queue": "a", "jid": "later"}']
    assert r.zcard("retry") == 0
    assert r.smembers("queues") == {b"a", b"b"}


def test_poller_uses_the_namespace(scripts: Commands, r: redis.Redis, config: Config) -> None:
    now = redis_now(r)
    r.zadd("ns:schedule", {'{"class":"X","queue":"q"}': now - 1})
    r.zadd("schedule", {'{"class":"Other","queue":"q"}': now - 1})
    assert poller(config.replace(namespace="ns"), r).enqueue_due() == 1
    assert r.llen("ns:queue:q") == 1 and r.smembers("ns:queues") == {b"q"}
    assert r.zcard("schedule") == 1 and r.exists("queue:q", "queues") == 0


@pytest.mark.parametrize(
    "member",
    [
        b"{not json",
        b"\xff\xfe binary",
        b'["class", "queue"]',
        b'{"class":"X","args":[]}',  # no queue
        b'{"class":"X","queue":7}',
        b'"just a string"',
    ],
)
def test_enqueue_due_sends_unusable_members_to_the_dead_set(
    scripts: Commands, r: redis.Redis, member: bytes
) -> None:
    t0 = redis_now(r)
    good = '{"class":"X","queue":"q"}'
    r.zadd("schedule", {member: t0 - 2, good: t0 - 1})
    assert enqueue_due(scripts, r) == 2
    [(dead, score)] = r.zrange("dead", 0, -1, withscores=True)
    assert dead == member  # kept as it was
    assert t0 <= score <= redis_now(r)
    assert r.llen("queue:q") == 1
    assert r.zcard("schedule") == 0
    assert r.keys("queue:*") == [b"queue:q"]


# -- ReliableFetch --------------------------------------------------------------------------


@pytest.fixture
def reliable(config: Config, r: redis.Redis, scripts: Commands) -> ReliableFetch:
    two_queues = config.replace(queues=[QueueSpec("a"), QueueSpec("b")])
    return ReliableFetch(WorkerContext.build(two_queues, r, IDENTITY))


@pytest.fixture
def client(config: Config, r: redis.Redis) -> Client:
    return Client(config, redis=r)


def test_retrieve_work_moves_jobs_into_private_lists(
    reliable: ReliableFetch, client: Client, r: redis.Redis
) -> None:
    a_jids = client.push_bulk("X", [[1], [2]], {"queue": "a"})
    b_jid = client.push("X", [3], {"queue": "b"})
    units = reliable.retrieve_work(10)
    assert [(u.queue, loads(u.raw)["jid"]) for u in units] == [
        ("a", a_jids[0]),
        ("a", a_jids[1]),
        ("b", b_jid),
    ]
    assert all(u.private_key == private(u.queue) for u in units)
    assert r.llen("queue:a") == r.llen("queue:b") == 0
    assert set(lrange(r, private("a"))) == {units[0].raw, units[1].raw}


def test_acknowledge_removes_exactly_one_copy(reliable: ReliableFetch, r: redis.Redis) -> None:
    r.lpush("queue:a", b'{"class":"X","queue":"a"}', b'{"class":"X","queue":"a"}')
    first, second = reliable.retrieve_work(2)
    assert first.raw == second.raw
    assert reliable.acknowledge(first) is True
    assert lrange(r, private("a")) == [second.raw]
    assert reliable.acknowledge(second) is True
    assert r.exists(private("a")) == 0
    assert r.llen("queue:a") == 0


def test_retrieve_work_applies_acks_in_the_same_call(
    reliable: ReliableFetch, client: Client, r: redis.Redis
) -> None:
    client.push_bulk("X", [[1], [2]], {"queue": "a"})
    done = reliable.retrieve_work(1)
    assert r.llen(private("a")) == 1
    nxt = reliable.retrieve_work(5, acks=done)
    assert len(nxt) == 1
    assert lrange(r, private("a")) == [nxt[0].raw]
    reliable.retrieve_work(0, acks=nxt)
    assert r.exists(private("a")) == 0


def test_settle_and_requeue_never_both_happen(
    reliable: ReliableFetch, client: Client, r: redis.Redis
) -> None:
    client.push_bulk("X", [[1], [2]], {"queue": "a"})
    failed, pushed_back = reliable.retrieve_work(2)

    assert reliable.settle(failed, "retry", 500.0, b"failed-payload") is True
    assert r.zrange("retry", 0, -1, withscores=True) == [(b"failed-payload", 500.0)]
    assert reliable.requeue([failed]) == 0  # already settled: not pushed back as well

    assert reliable.requeue([pushed_back]) == 1
    assert reliable.settle(pushed_back, "retry", 600.0, b"late") is False  # no longer ours
    assert r.zcard("retry") == 1
    assert run_order(r, "queue:a") == [pushed_back.raw]
    assert r.exists(private("a")) == 0


def test_requeue_unheld_pushes_back_only_what_no_thread_holds(
    reliable: ReliableFetch, client: Client, r: redis.Redis
) -> None:
    client.push_bulk("X", [[1], [2], [3]], {"queue": "a"})
    client.push("X", [4], {"queue": "b"})
    units = reliable.retrieve_work(10)
    assert len(units) == 4
    # A move whose reply was lost: the job is in the private list but nobody holds it.
    r.lpush("queue:b", b'{"class":"X","queue":"b","args":[5]}')
    r.lmove("queue:b", private("b"), "RIGHT", "LEFT")
    r.srem("queues", "b")

    held = [units[1]]
    assert reliable.requeue_unheld(held, "test") == 4
    assert lrange(r, private("a")) == [units[1].raw]
    assert r.exists(private("b")) == 0
    # Pushed back to the head, the oldest fetched next to run.
    assert run_order(r, "queue:a") == [units[0].raw, units[2].raw]
    assert run_order(r, "queue:b") == [units[3].raw, b'{"class":"X","queue":"b","args":[5]}']
    assert r.smembers("queues") == {b"a", b"b"}
    assert reliable.requeue_unheld(held, "test") == 0


def test_requeue_unheld_counts_identical_payloads(
    reliable: ReliableFetch, r: redis.Redis
) -> None:
    same = b'{"class":"X","queue":"a","args":[]}'
    r.lpush("queue:a", same, same, same)
    units = reliable.retrieve_work(3)
    assert reliable.requeue_unheld([units[0], reliable.unit("a", same)], "test") == 1
    assert lrange(r, private("a")) == [same, same]
    assert lrange(r, "queue:a") == [same]


def test_the_poller_counts_processes_once_a_minute(
    config: Config, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sidekiq's interval is ``processes x 5 s``; the count is read at most every
    PROCESS_COUNT_TTL seconds, not on every poll (an idle worker's commands)."""
    from rfetch.worker import scheduled

    r.sadd("processes", "a", "b", "c")
    clock = [1000.0]
    monkeypatch.setattr(scheduled.time, "monotonic", lambda: clock[0])
    poller = Poller(WorkerContext.build(config, r, IDENTITY))
    before = _calls(r, "scard")
    waits = [poller.interval() for _ in range(20)]
    assert all(7.5 <= w <= 22.5 for w in waits), "3 processes x 5 s, in [0.5x, 1.5x]"
    assert _calls(r, "scard") - before == 1
    r.sadd("processes", "d", "e", "f")
    clock[0] += scheduled.PROCESS_COUNT_TTL
    waits = [poller.interval() for _ in range(20)]
    assert _calls(r, "scard") - before == 2
    assert max(waits) > 22.5, "the new count (6 processes) is used"


def _calls(r: redis.Redis, command: str) -> int:
    stats = r.info("commandstats").get(f"cmdstat_{command}")
    return int(stats["calls"]) if stats else 0
