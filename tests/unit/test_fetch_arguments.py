"""``fetch.lua``'s KEYS and ARGV, as :meth:`rfetch.store.commands.Commands.fetch` builds them
for a few routings of acknowledgements and fetch options: the exact lists the script reads
(pinned so that a refactoring of the argument building changes nothing sent to Redis); an
acknowledgement that ends more than a plain job carries one record
(:mod:`rfetch.store.job_record`), and the prefix its keys are derived from comes last.

The client points at a port nobody listens on, and the unit tier fails any attempt to
connect: the script call is replaced by a recorder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import pytest
from redis import Redis

from rfetch.jobs.payload import Routing
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys

Sent = tuple[list[str], list[bytes | str | int]]
Args = (
    tuple[str | None, list[str], int, int, list[str], list["Unit"], list[str]]
    | tuple[str | None, list[str], int, int, list[str], list["Unit"], list[str], list[str]]
)


@dataclass(frozen=True)
class Unit:
    queue: str
    raw: bytes
    routing: Routing | None


def sent(
    namespace: str | None,
    names: Sequence[str],
    fetch_count: int,
    limit: int,
    fair: Sequence[str],
    acks: Sequence[Unit],
    capped: Sequence[str],
    prio: Sequence[str] = (),
) -> Sent:
    """The KEYS and ARGV one ``Commands.fetch`` call gives ``fetch.lua``."""
    commands = Commands(Redis(port=1), Keys(namespace))
    calls: list[Sent] = []

    def record(keys: list[str], args: list[bytes | str | int], client: Redis) -> list[object]:
        calls.append((keys, args))
        return [0, [], []]

    commands.scripts = replace(commands.scripts, fetch=record)  # type: ignore[arg-type]
    public = {name: commands.keys.queue(name) for name in names}
    private = {name: f"{commands.keys.queue(name)}:p1" for name in names}
    reply = commands.fetch(
        names, public, private, fetch_count, limit, fair, acks, capped, prio
    )
    assert (reply.looked_at, reply.jobs, reply.broken) == (0, [], {})
    assert len(calls) == 1
    return calls[0]


KEYED = Routing(jid="j2", queue="a", ordering_key="k", unique="u", bid="b1",
                concurrency_key="c", concurrency_limit=2)
CASES: dict[str, Args] = {
    "plain": (
        None, ["a", "b"], 2, 5, [],
        [Unit("b", b"p1", None), Unit("a", b"p2", Routing(jid="j1", queue="a"))], [],
    ),
    "fair_and_capped_fetch": ("ns", ["a", "b", "c"], 2, 3, ["b"], [], ["a"]),
    "every_acknowledgement": (
        "{ns}", ["a", "b", "c"], 3, 4, ["c"],
        [
            Unit("c", b"s1", Routing(jid="j1", queue="c", concurrency_key="c1",
                                     concurrency_limit=1)),
            Unit("a", b"k1", KEYED),
            Unit("b", b"b1", Routing(jid="j3", queue="b", bid="b2")),
            Unit("a", b"p1", None),
            Unit("b", b"o1", Routing(jid="j4", queue="b", ordering_key="o")),
        ],
        ["b"],
    ),
    "priority_fetch": (
        "ns", ["a", "b", "c"], 3, 2, ["c"],
        [Unit("b", b"r1", Routing(jid="j6", queue="b", priority=5))], ["a"], ["b", "c"],
    ),
    "only_acknowledge_batched_cap": (
        None, ["a"], 1, 0, [],
        [Unit("a", b"x", Routing(jid="j5", queue="a", bid="b3", concurrency_key="c",
                                 concurrency_limit=3))],
        [],
    ),
}

EXPECTED: dict[str, Sent] = {
    "plain": (
        ["queue:a", "queue:a:p1", "queue:b", "queue:b:p1"],
        [5, 2, 2, 0, 0, 0, 2, 2, b"p1", 1, b"p2", 0],
    ),
    "fair_and_capped_fetch": (
        ["ns:queue:a", "ns:queue:a:p1", "ns:queue:b", "ns:queue:b:p1", "ns:queue:c",
         "ns:queue:c:p1", "ns:rfetch:fair:b", "ns:rfetch:fair-credits:b",
         "ns:rfetch:fair-weights:b", "ns:rfetch:cap:a", "ns:rfetch:cap-held:a",
         "ns:rfetch:cap-slots:a", "ns:rfetch:cap-limits:a", "ns:rfetch:fair-wake:a",
         "ns:rfetch:cap-queues"],
        [3, 3, 2, 1, 2, 1, 1, 0, 0, 0],
    ),
    "every_acknowledgement": (
        ["{ns}:queue:a", "{ns}:queue:a:p1", "{ns}:queue:b", "{ns}:queue:b:p1", "{ns}:queue:c",
         "{ns}:queue:c:p1", "{ns}:rfetch:fair:c", "{ns}:rfetch:fair-credits:c",
         "{ns}:rfetch:fair-weights:c", "{ns}:rfetch:cap:b", "{ns}:rfetch:cap-held:b",
         "{ns}:rfetch:cap-slots:b", "{ns}:rfetch:cap-limits:b", "{ns}:rfetch:fair-wake:b",
         "{ns}:rfetch:cap-queues", "{ns}:"],
        [4, 3, 3, 1, 3, 1, 2, 0, 1, 1, b"p1", 4,
         3, b"s1", '{"q":"c","jid":"j1","ck":"c1","limit":1}',
         1, b"k1", '{"q":"a","jid":"j2","key":"k","unique":"u","ck":"c","limit":2,"bid":"b1"}',
         2, b"b1", '{"q":"b","jid":"j3","bid":"b2"}',
         2, b"o1", '{"q":"b","jid":"j4","key":"o"}'],
    ),
    # A priority job's acknowledgement is a bare LREM: its priority needs no record.
    "priority_fetch": (
        ["ns:queue:a", "ns:queue:a:p1", "ns:queue:b", "ns:queue:b:p1", "ns:queue:c",
         "ns:queue:c:p1", "ns:rfetch:fair:c", "ns:rfetch:fair-credits:c",
         "ns:rfetch:fair-weights:c", "ns:rfetch:cap:a", "ns:rfetch:cap-held:a",
         "ns:rfetch:cap-slots:a", "ns:rfetch:cap-limits:a", "ns:rfetch:fair-wake:a",
         "ns:rfetch:cap-queues", "ns:rfetch:prio:b", "ns:rfetch:prio:c"],
        [2, 3, 3, 1, 3, 1, 1, 2, 2, 3, 1, 2, b"r1", 0],
    ),
    "only_acknowledge_batched_cap": (
        ["queue:a", "queue:a:p1", ""],
        [0, 1, 1, 0, 0, 0, 0, 1, 1, b"x",
         '{"q":"a","jid":"j5","ck":"c","limit":3,"bid":"b3"}'],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fetch_sends_the_pinned_keys_and_argv(case: str) -> None:
    assert sent(*CASES[case]) == EXPECTED[case]
