"""Reading payloads that break the parser or carry producer fields of unexpected types: never
an exception other than InvalidJob, never a loop (no Redis)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rfetch.errors import ArgsNotSerializable, InvalidJob
from rfetch.jobs.payload import MAX_NESTING, Routing, check_args, loads
from rfetch.worker.retry import attempts_id, backtrace_lines


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def deep_payload(depth: int) -> bytes:
    """A payload nested ``depth`` levels, its own object being the first."""
    return ('{"class":"X","jid":"j","ordering_key":"k","args":' + nested(depth - 1) + "}").encode()


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 600, 1500, 100_000])
def test_json_nested_deeper_than_rfetch_reads_is_invalid_whatever_the_parser(depth: int) -> None:
    # rfetch's own limit, below every parser's (orjson: 1,024 levels; json: the recursion
    # limit on 3.10-3.12, deeper on 3.13): the same payload is invalid on every Python.
    raw = deep_payload(depth)
    with pytest.raises(InvalidJob, match=f"not valid JSON: nested deeper than {MAX_NESTING}"):
        loads(raw)
    assert Routing.parse(raw) is None  # read at fetch: a plain job, buried when run
    with pytest.raises(InvalidJob, match="not valid JSON"):
        loads(raw.decode())


def test_json_nested_to_the_limit_is_read() -> None:
    raw = deep_payload(MAX_NESTING)
    assert loads(raw)["jid"] == "j"
    assert loads(raw.decode())["jid"] == "j"
    assert Routing.parse(raw) is not None


def test_brackets_in_strings_do_not_count_as_nesting() -> None:
    raw = ('{"class":"X","jid":"j","args":["' + "[{" * 1000 + '"]}').encode()
    assert loads(raw)["args"] == ["[{" * 1000]


def test_arguments_nested_deeper_than_the_payload_limit_are_refused_at_the_push() -> None:
    args = json.loads(nested(MAX_NESTING - 1))  # the args list at level 2: 512 in all
    check_args(args)
    with pytest.raises(ArgsNotSerializable, match=f"limit of {MAX_NESTING} levels"):
        check_args([args])
    with pytest.raises(ArgsNotSerializable, match=f"limit of {MAX_NESTING} levels"):
        check_args([{"a": args[0]}, 1])  # a dict is a level too


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
