"""Priorities without Redis: the priority set's scores (:mod:`rfetch.store.priority`, the
same numbers as ``rfetch/lua/lib/priority.lua``, read here as text), the ``priority``
option's checks, the payload field and the job's record."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import pytest

import rfetch
from rfetch.errors import ConfigError
from rfetch.jobs.options import check_options, priority_of
from rfetch.jobs.payload import Routing
from rfetch.store.job_record import job_record, put_back_record
from rfetch.store.priority import (
    ABOVE_LIST_SCORE,
    BAND,
    HALF,
    priority_score,
    score_priority,
)


def lua_constant(name: str) -> int:
    text = resources.files("rfetch").joinpath("lua/lib/priority.lua").read_text("utf-8")
    match = re.search(rf"^local {name} = (\d+)", text, re.MULTILINE)
    assert match, name
    return int(match.group(1))


def test_the_lua_library_uses_the_same_numbers() -> None:
    assert lua_constant("PRIO_MAX") == 100
    assert lua_constant("PRIO_BAND") == BAND == 2**44
    assert lua_constant("PRIO_HALF") == HALF == 2**43


def test_the_lua_threshold_of_the_list_is_100_bands() -> None:
    text = resources.files("rfetch").joinpath("lua/lib/priority.lua").read_text("utf-8")
    match = re.search(r"^local PRIO_ABOVE_LIST = '\((\d+)'", text, re.MULTILINE)
    assert match and int(match.group(1)) == ABOVE_LIST_SCORE == 100 * BAND


def test_every_score_is_exact_in_a_double() -> None:
    highest = priority_score(-100, HALF - 1)
    assert highest < 2**53
    assert float(highest) == highest and float(highest + 1) == highest + 1


def test_higher_priority_scores_lower_and_push_order_holds_within() -> None:
    jobs = [(p, seq) for seq, p in enumerate([3, -2, 100, 3, 1, -100, 1, -2, 100], 1)]
    ranked = sorted(jobs, key=lambda j: priority_score(*j))
    assert ranked == sorted(jobs, key=lambda j: (-j[0], j[1]))


def test_a_job_put_back_comes_first_of_its_priority_only() -> None:
    new = priority_score(5, 7)
    back = priority_score(5, 9, at_head=True)  # later sequence, but put back
    assert back < new
    assert priority_score(6, 10**12) < back  # a higher priority still comes first
    assert back < priority_score(4, 1, at_head=True) < priority_score(4, 1)
    # the latest put back runs first (as RPUSH at the list's head)
    assert priority_score(5, 10, at_head=True) < back


def test_the_list_sits_between_positive_and_negative_priorities() -> None:
    assert priority_score(1, HALF - 1) < ABOVE_LIST_SCORE
    assert priority_score(-1, HALF - 1, at_head=True) > ABOVE_LIST_SCORE


@pytest.mark.parametrize("priority", [-100, -1, 1, 37, 100])
def test_the_priority_reads_back_from_its_score(priority: int) -> None:
    for seq, at_head in ((1, False), (HALF - 1, False), (1, True), (HALF - 1, True)):
        assert score_priority(priority_score(priority, seq, at_head)) == priority


@pytest.mark.parametrize(("priority", "seq"), [(0, 1), (101, 1), (-101, 1), (5, 0), (5, HALF)])
def test_scores_out_of_range_are_refused(priority: int, seq: int) -> None:
    with pytest.raises(ValueError):
        priority_score(priority, seq)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("5", "whole number .* got '5' \\(str\\)"),
        (2.5, "whole number .* got 2.5 \\(float\\)"),
        (True, "whole number .* got True \\(bool\\)"),
        (None.__class__, "whole number"),
        (101, "from -100 to 100 .* got 101"),
        (-101, "from -100 to 100 .* got -101"),
    ],
)
def test_bad_priorities_get_a_clear_error(value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_options({"priority": value})


@pytest.mark.parametrize(
    "other",
    [{"tenant": "t"}, {"concurrency_key": "c", "concurrency_limit": 1}, {"after": "a" * 24}],
)
def test_combinations_that_would_lose_the_priority_are_refused(other: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="priority cannot be combined with"):
        check_options({"priority": 1, **other})
    check_options({"priority": 0, **other})  # 0 is no priority: allowed with anything


def test_a_class_priority_is_checked_where_the_class_is_defined() -> None:
    with pytest.raises(ConfigError, match=r"Urgent\.priority must be a whole number"):

        class Urgent(rfetch.Job):
            priority = "high"  # type: ignore[assignment]

    class Fine(rfetch.Job):
        priority = 10

    assert Fine.default_options()["priority"] == 10


def test_the_function_decorator_takes_a_priority() -> None:
    @rfetch.job(priority=-5)
    def cleanup() -> None: ...

    assert cleanup.job_class.default_options()["priority"] == -5
    with pytest.raises(ConfigError, match="priority must be from -100 to 100"):
        rfetch.job(priority=500)


def test_routing_and_record_carry_the_priority() -> None:
    assert priority_of(7) == 7 and priority_of(True) == 0 and priority_of(101) == 0
    assert priority_of("3") == 0 and priority_of(4.0) == 4 and priority_of(4.5) == 0
    assert priority_of(float("nan")) == 0 and priority_of(float("inf")) == 0
    raw = b'{"jid":"j1","queue":"q","priority":-9}'
    routing = Routing.parse(raw)
    assert routing is not None and routing.priority == -9 and routing.gated
    assert not routing.locking  # its acknowledgement is a bare LREM
    assert job_record("q", routing) == '{"q":"q","jid":"j1","prio":-9}'
    # At fetch a priority alone is not looked for (no search more than a plain fetch's);
    # the job's put-back record finds it.
    assert Routing.parse(raw, fetched=True) is None
    assert put_back_record("q", raw, None) == '{"q":"q","jid":"j1","prio":-9}'
    assert put_back_record("q", b'{"jid":"j2"}', None) == ""
    keyed = Routing.parse(b'{"jid":"j3","ordering_key":"k","priority":4}', fetched=True)
    assert keyed is not None and keyed.priority == 4  # parsed for its key: priority read
    assert Routing.parse(b'{"jid":"j1","queue":"q"}') is None  # plain: no parse at all
    zero = Routing.parse(b'{"jid":"j1","priority":0}')
    assert zero is not None and not zero.gated  # 0: a plain job of the list
