"""Reading payloads that break the parser or carry producer fields of unexpected types: never
an exception other than InvalidJob, never a loop (no Redis)."""

from __future__ import annotations

from typing import Any

import pytest

from rfetch.errors import InvalidJob
from rfetch.payload import Routing, loads
from rfetch.worker.retry import attempts_id, backtrace_lines


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [1500, 100_000])
def test_json_nested_deeper_than_the_parser_is_invalid(depth: int) -> None:
    raw = ('{"class":"X","jid":"j","ordering_key":"k","args":' + nested(depth) + "}").encode()
    with pytest.raises(InvalidJob, match="not valid JSON"):
        loads(raw)
    assert Routing.parse(raw) is None  # read at fetch: a plain job, buried when run


@pytest.mark.parametrize(
    ("value", "lines"),
    [(True, 20), (5, 5), (0, 0), (-3, 0), (False, 0), (None, 0), ("x", 0), ([1], 0), (2.5, 0)],
)
def test_backtrace_option_of_any_type_gives_a_line_count(value: Any, lines: int) -> None:
    assert backtrace_lines(value, 20) == lines


def test_attempts_are_counted_by_the_jid_the_payload_carries() -> None:
    raw = b'{"class":"X","args":[],"jid":"abc"}'
    assert attempts_id(raw, loads(raw)) == "abc"


def test_attempts_of_a_payload_without_jid_are_counted_by_its_bytes() -> None:
    raw = b'{"class":"X","args":[]}'
    first, second = attempts_id(raw, loads(raw)), attempts_id(raw, loads(raw))
    assert first == second  # loads makes up a new jid each time; the count must not reset
    assert first.startswith("sha1-")
    assert attempts_id(b"not json", None) == attempts_id(b"not json", None)
