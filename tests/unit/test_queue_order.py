"""QueueOrder: Sidekiq's strict and weighted queue order for each fetch."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from rfetch.config import Config, QueueSpec
from rfetch.worker.queue_order import QueueOrder


def order_for(*queues: str, strict: bool | None = None, seed: int = 1) -> QueueOrder:
    config = Config(queues=[QueueSpec.parse(q) for q in queues], strict=strict)
    return QueueOrder(config, random.Random(seed))


@pytest.mark.parametrize(
    ("queues", "strict"),
    [
        (("critical", "default", "low"), None),
        (("critical,1", "default,1"), None),
        (("critical,3", "default", "low,2"), True),
        (("only,5",), None),
    ],
)
def test_strict_order_is_exactly_the_listed_order(queues: tuple[str, ...], strict: bool) -> None:
    order = order_for(*queues, strict=strict)
    listed = [QueueSpec.parse(q).name for q in queues]
    for _ in range(200):
        assert order.next() == listed


def test_strict_order_returns_a_fresh_list() -> None:
    order = order_for("a", "b")
    first = order.next()
    first.remove("a")
    assert order.next() == ["a", "b"]


def test_weighted_order_puts_heavier_queue_first_about_three_times_as_often() -> None:
    order = order_for("critical,3", "default,1", seed=20240501)
    draws = 8000
    firsts = Counter(order.next()[0] for _ in range(draws))
    assert set(firsts) == {"critical", "default"}
    ratio = firsts["critical"] / firsts["default"]
    # P(critical first) = 3/4 in Sidekiq's shuffle-then-uniq scheme: ratio 3.
    assert 2.6 < ratio < 3.5, firsts


def test_weighted_order_names_every_queue_exactly_once() -> None:
    order = order_for("critical,3", "default,2", "low", seed=7)
    seen_first: Counter[str] = Counter()
    seen_orders: set[tuple[str, ...]] = set()
    for _ in range(2000):
        names = order.next()
        assert sorted(names) == ["critical", "default", "low"]
        seen_first[names[0]] += 1
        seen_orders.add(tuple(names))
    # Randomised per fetch: every queue is sometimes first, and more than one order occurs.
    assert set(seen_first) == {"critical", "default", "low"}
    assert seen_first["critical"] > seen_first["default"] > seen_first["low"]
    assert len(seen_orders) > 1


def test_strict_false_with_equal_weights_shuffles() -> None:
    order = order_for("a", "b", strict=False, seed=3)
    firsts = Counter(order.next()[0] for _ in range(2000))
    assert 0.8 < firsts["a"] / firsts["b"] < 1.25, firsts


def test_same_seed_gives_same_sequence() -> None:
    one = order_for("a,2", "b", "c,3", seed=99)
    two = order_for("a,2", "b", "c,3", seed=99)
    assert [one.next() for _ in range(50)] == [two.next() for _ in range(50)]
