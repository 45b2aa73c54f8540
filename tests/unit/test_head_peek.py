"""The look at the queues' next jobs before a probe for async jobs
(rfetch.worker.head_peek), on stand-ins for Redis and the event loop's pool."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from rfetch.config import Config, QueueSpec
from rfetch.store.keys import Keys
from rfetch.worker.event_loop import AsyncPool
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.head_peek import async_next


class Pipe:
    """Answers ``LINDEX <key> -1`` from ``lists`` (key -> jobs, the next one last)."""

    def __init__(self, lists: dict[str, list[bytes]], asked: list[str]) -> None:
        self.lists = lists
        self.asked = asked
        self.keys: list[str] = []

    def lindex(self, key: str, index: int) -> None:
        assert index == -1  # the end the fetch takes from
        self.keys.append(key)
        self.asked.append(key)

    def execute(self) -> list[bytes | None]:
        return [self.lists[k][-1] if self.lists.get(k) else None for k in self.keys]


def _fetch(lists: dict[str, list[bytes]], asked: list[str], **state: Any) -> ReliableFetch:
    config = Config(queues=[QueueSpec("a"), QueueSpec("b")])
    redis = SimpleNamespace(pipeline=lambda transaction: Pipe(lists, asked))
    fetch = SimpleNamespace(
        config=config, keys=Keys(), redis=redis, broken={}, fair=frozenset(),
        capped=frozenset(), prio=frozenset(),
        unit=lambda queue, raw: SimpleNamespace(queue=queue, raw=raw),
    )
    vars(fetch).update(state)
    return cast(ReliableFetch, fetch)


LOOP = cast(AsyncPool, SimpleNamespace(accepts=lambda unit: unit.raw.startswith(b"async")))


def test_true_only_when_some_queues_next_job_is_async() -> None:
    asked: list[str] = []
    lists = {"queue:a": [b"async-2", b"sync-1"], "queue:b": []}
    assert not async_next(_fetch(lists, asked), LOOP, ())
    assert asked == ["queue:a", "queue:b"]  # one pipeline, every queue
    lists["queue:b"] = [b"async-1"]
    assert async_next(_fetch(lists, []), LOOP, ())
    assert not async_next(_fetch(lists, []), LOOP, ("b",))  # paused: not looked at
    assert not async_next(_fetch(lists, [], broken={"b": "hash"}), LOOP, ())
    assert not async_next(_fetch(lists, []), None, ())  # no event loop


def test_a_fair_or_capped_queue_is_fetched_from_to_see() -> None:
    asked: list[str] = []
    assert async_next(_fetch({}, asked, fair=frozenset({"a"})), LOOP, ())
    assert async_next(_fetch({}, asked, capped=frozenset({"b"})), LOOP, ())
    assert async_next(_fetch({}, asked, prio=frozenset({"b"})), LOOP, ())  # priority set
    assert asked == []
