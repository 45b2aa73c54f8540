"""``rfetch.store.commands.Commands``: every Lua script called through its typed method on the
real session redis-server. Each test checks what the script did, and that every key it
changed was passed in KEYS, or is one of the derived names the scripts' headers declare: a
tenant list derived from a ring key passed in KEYS, and (``enqueue_due.lua`` only) the keys
of a queue named by a job, derived from the namespace prefix passed in KEYS."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from rfetch.jobs.payload import Routing
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from rfetch.store.replies import Outgoing

NS = "{app}"
KEYS = Keys(NS)
PRIVATE = KEYS.private("h:1:0123456789ab", "q")


class Spy:
    """A registered script that records the KEYS of every call."""

    def __init__(self, script: Any, calls: list[list[str]]) -> None:
        self.script = script
        self.calls = calls

    def __call__(self, keys: list[str], args: list[Any], client: Any = None) -> Any:
        self.calls.append(list(keys))
        return self.script(keys=keys, args=args, client=client)


@pytest.fixture
def calls() -> list[list[str]]:
    return []


@pytest.fixture
def commands(r: redis.Redis, calls: list[list[str]]) -> Commands:
    c = Commands(r, KEYS)
    spied = {f.name: Spy(getattr(c.scripts, f.name), calls) for f in dataclasses.fields(c.scripts)}
    c.scripts = dataclasses.replace(c.scripts, **spied)
    return c


@pytest.fixture
def declared(r: redis.Redis, calls: list[list[str]]) -> Iterator[None]:
    """Fails the test if a script changed a key it was not given (tenant lists aside)."""
    before = {k: r.dump(k) for k in r.keys("*")}
    yield
    after = {k: r.dump(k) for k in r.keys("*")}
    changed = {
        k.decode() for k in before.keys() | after.keys() if before.get(k) != after.get(k)
    }
    passed = {k for keys in calls for k in keys}
    prefixes = {ring + "|" for ring in passed if ring.startswith(KEYS.fair_ring(""))}
    prefixes |= {KEYS.prefix} & passed
    undeclared = {k for k in changed - passed if not k.startswith(tuple(prefixes))}
    assert not undeclared, f"keys changed but not passed in KEYS: {sorted(undeclared)}"


def job(jid: str, **fields: Any) -> bytes:
    return json.dumps({"class": "X", "args": [], "queue": "q", "jid": jid, **fields}).encode()


def routing(raw: bytes) -> Routing:
    parsed = Routing.parse(raw)
    assert parsed is not None
    return parsed


@dataclasses.dataclass(frozen=True)
class Unit:
    queue: str
    raw: bytes
    routing: Routing | None


def push(commands: Commands, r: redis.Redis, raw: bytes) -> int:
    [written] = commands.push([Outgoing("q", raw.decode(), None, routing(raw), 60_000)])
    return int(written)


def fetch(commands: Commands, limit: int, acks: list[Unit] = ()) -> list[bytes]:  # type: ignore[assignment]
    reply = commands.fetch(["q"], {"q": KEYS.queue("q")}, {"q": PRIVATE}, 1, limit, [], acks)
    assert all(i == 0 for i, _ in reply.jobs)
    return [raw for _, raw in reply.jobs]


pytestmark = pytest.mark.usefixtures("declared")


def test_fetch_applies_plain_and_releasing_acknowledgements_in_one_call(
    commands: Commands, r: redis.Redis
) -> None:
    first, second = job("j1", ordering_key="k", unique_key="u"), job("j2", ordering_key="k")
    plain = job("p1")
    assert push(commands, r, first) == 1
    assert push(commands, r, second) == 1  # waits behind j1
    r.lpush(KEYS.queue("q"), plain)
    assert fetch(commands, 2) == [first, plain]
    acks = [Unit("q", first, routing(first)), Unit("q", plain, None)]
    # j1's acknowledgement releases k: j2 goes out and is fetched by the same call.
    assert fetch(commands, 5, acks) == [second]
    assert r.lrange(PRIVATE, 0, -1) == [second]
    assert r.hget(KEYS.key_holders("q"), "k") == b"j2"
    assert r.exists(KEYS.unique("u")) == 0


def test_fetch_names_a_queue_whose_key_is_not_a_list(commands: Commands, r: redis.Redis) -> None:
    r.set(KEYS.queue("bad"), "x")
    r.lpush(KEYS.queue("q"), b"a")
    names = ["bad", "q"]
    reply = commands.fetch(
        names, {n: KEYS.queue(n) for n in names}, {n: KEYS.private("h:1:0", n) for n in names},
        2, 5, [], [],
    )
    assert reply.broken == {0: "string"}
    assert reply.jobs == [(1, b"a")]
    assert reply.looked_at == 2


def test_fetch_takes_a_tenant_job_from_the_ring(commands: Commands, r: redis.Redis) -> None:
    raw = job("t1", tenant="acme")
    assert push(commands, r, raw) == 1
    reply = commands.fetch(["q"], {"q": KEYS.queue("q")}, {"q": PRIVATE}, 1, 5, ["q"], [])
    assert reply.jobs == [(0, raw)]
    assert r.exists(KEYS.fair_ring("q"), KEYS.fair_tenant("q", "acme")) == 0


def test_push_refuses_a_held_unique_lock(commands: Commands, r: redis.Redis) -> None:
    assert push(commands, r, job("j1", unique_key="u")) == 1
    assert push(commands, r, job("j2", unique_key="u")) == 0
    assert r.llen(KEYS.queue("q")) == 1


def test_requeue_puts_each_kind_of_job_back_where_it_belongs(
    commands: Commands, r: redis.Redis
) -> None:
    holder, waiter, tenant, plain = (
        job("h", ordering_key="k"), job("w", ordering_key="k"), job("t", tenant="acme"), job("p")
    )
    r.hset(KEYS.key_holders("q"), "k", "h")
    r.lpush(PRIVATE, holder, waiter, tenant, plain)
    jobs = [(raw, Routing.parse(raw)) for raw in (holder, waiter, tenant, plain)]
    assert commands.requeue(PRIVATE, "q", jobs).pushed == 4
    assert r.lrange(KEYS.queue("q"), 0, -1) == [plain, holder]  # holder runs next
    assert r.lrange(KEYS.key_list("q", "k"), 0, -1) == [waiter]
    assert r.lrange(KEYS.fair_tenant("q", "acme"), 0, -1) == [tenant]
    assert r.exists(PRIVATE) == 0


@pytest.mark.parametrize(
    ("outcome", "holder_after"), [("retry", b"j1"), ("skip", b"j2"), ("dead", b"j2")]
)
def test_settle_keeps_or_releases_the_key(
    commands: Commands, r: redis.Redis, outcome: Any, holder_after: bytes
) -> None:
    raw = job("j1", ordering_key="k", unique_key="u")
    push(commands, r, raw)
    push(commands, r, job("j2", ordering_key="k"))
    r.lmove(KEYS.queue("q"), PRIVATE, "RIGHT", "LEFT")
    written = commands.settle(
        PRIVATE, "q", raw, KEYS.retry, 10.0, b"stored", routing(raw), outcome
    )
    assert written and r.zrange(KEYS.retry, 0, -1) == [b"stored"]
    assert r.hget(KEYS.key_holders("q"), "k") == holder_after
    assert r.exists(KEYS.unique("u")) == (0 if outcome == "dead" else 1)


def test_finish_removes_and_releases_only_once(commands: Commands, r: redis.Redis) -> None:
    raw = job("j1", ordering_key="k", unique_key="u")
    push(commands, r, raw)
    r.lmove(KEYS.queue("q"), PRIVATE, "RIGHT", "LEFT")
    assert commands.finish(PRIVATE, "q", raw, routing(raw)) is True
    assert r.exists(KEYS.key_holders("q"), KEYS.unique("u"), PRIVATE) == 0
    assert commands.finish(PRIVATE, "q", raw, routing(raw)) is False


def test_coalesce_moves_the_waiting_jobs_of_the_holder(commands: Commands, r: redis.Redis) -> None:
    holder = job("h", ordering_key="k")
    push(commands, r, holder)
    followers = [job(f"f{i}", ordering_key="k") for i in range(3)]
    for raw in followers:
        push(commands, r, raw)
    r.lmove(KEYS.queue("q"), PRIVATE, "RIGHT", "LEFT")
    assert commands.coalesce(PRIVATE, "q", "k", "someone", 10) == []
    assert commands.coalesce(PRIVATE, "q", "k", "h", 2) == followers[:2]
    assert r.lrange(KEYS.key_list("q", "k"), 0, -1) == [followers[2]]


def test_an_expired_lease_lets_rescue_release_the_key(commands: Commands, r: redis.Redis) -> None:
    push(commands, r, job("h", ordering_key="k"))
    nxt = job("n", ordering_key="k")
    push(commands, r, nxt)
    r.delete(KEYS.queue("q"))  # the holder vanished
    pipe = r.pipeline(transaction=False)
    commands.lease(pipe, [("q", "h", "k")], -5)
    pipe.execute()
    assert commands.rescue("q", "k", "h", 60) is False  # not expired long enough
    assert commands.rescue("q", "k", "h", 1) is True
    assert r.lrange(KEYS.queue("q"), 0, -1) == [nxt]
    assert r.hget(KEYS.key_holders("q"), "k") == b"n"


def test_recover_counts_and_stops_at_a_poison_pill(commands: Commands, r: redis.Redis) -> None:
    raw = job("j1", ordering_key="k")
    r.hset(KEYS.key_holders("q"), "k", "j1")
    for _ in range(2):
        r.lpush(PRIVATE, raw)
        assert commands.recover(PRIVATE, "q", raw, routing(raw), "j1", 3, 60) == "requeued"
        assert r.lpop(KEYS.queue("q")) == raw
    assert commands.recover(PRIVATE, "q", raw, routing(raw), "j1", 3, 60) == "poison"
    r.delete(KEYS.recoveries("j1"))
    assert commands.recover(PRIVATE, "q", raw, routing(raw), "j1", 3, 60) == "gone"


def test_unlock_only_with_the_token(commands: Commands, r: redis.Redis) -> None:
    r.set(KEYS.recovery_lock, "me")
    assert commands.unlock(KEYS.recovery_lock, "you") is False
    assert commands.unlock(KEYS.recovery_lock, "me") is True


def test_enqueue_due_derives_the_queue_keys_in_the_namespace(
    commands: Commands, r: redis.Redis
) -> None:
    keyed, tenant, plain = job("a", ordering_key="k"), job("b", tenant="acme"), job("c")
    r.zadd(KEYS.schedule, {keyed: 1, tenant: 2, plain: 3})
    assert commands.enqueue_due(KEYS.schedule, 10).moved == 3
    assert r.hget(KEYS.key_holders("q"), "k") == b"a"
    assert r.llen(KEYS.queue("q")) == 2
    assert r.llen(KEYS.fair_tenant("q", "acme")) == 1
    assert all(k.startswith(NS.encode()) for k in r.keys("*"))


def test_api_find_and_api_move_round_trip(commands: Commands, r: redis.Redis) -> None:
    raw = job("j1", ordering_key="k", unique_key="u")
    r.zadd(KEYS.retry, {raw: 5.0})
    r.hset(KEYS.key_holders("q"), "k", "j1")
    r.set(KEYS.unique("u"), "j1")
    found = commands.api_find(KEYS.retry, "zset", 0, 10, ["j1", "nope"])
    assert (found.examined, found.matches) == (1, [(0, raw, 5.0)])
    pipe = r.pipeline(transaction=False)
    commands.api_move(pipe, KEYS.retry, "queue", raw, raw, routing(raw), queue="q")
    commands.api_move(pipe, KEYS.retry, "dead", raw, raw, routing(raw), score=1.0)
    assert pipe.execute() == [1, 0]  # moved once: the second found nothing
    assert r.lrange(KEYS.queue("q"), 0, -1) == [raw]  # the holder goes out
    assert r.exists(KEYS.dead) == 0
