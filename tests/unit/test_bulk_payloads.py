"""A bulk push builds its payloads from one template when the jobs' options are all alike:
each payload must be what a push of that job alone would build, field order included, and
own its list fields. The client points at a port nobody listens on: nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from rfetch.config import Config
from rfetch.errors import ArgsNotSerializable
from rfetch.push.client import Client

OPTION_SETS: list[dict[str, Any]] = [
    {},
    {"queue": "mail", "retry": 3, "dead": False, "backtrace": 5},
    {"tags": ["a", "b"], "retry_queue": "slow", "timeout": 30},
    {"key": "acct-1"},
    {"tenant": "t1", "score": 2},
    {"unique_for": 60},  # per-job digest: built one by one
]


@pytest.mark.parametrize("options", OPTION_SETS)
@pytest.mark.parametrize("at", [None, 4_000_000_000.0])
def test_each_bulk_payload_is_what_build_makes(options: dict[str, Any], at: float | None) -> None:
    client = Client(Config(redis_url="redis://127.0.0.1:1/0"))
    args_list = [[1, {"x": [2]}], ["two"], []]
    built = client.prepare_bulk("app.Job", args_list, options, at)
    assert [i for i, _ in built] == [0, 1, 2]
    for (index, payload), args in zip(built, args_list, strict=True):
        alone = client.build(
            "app.Job", args, options, at, now=payload["created_at"], jid=payload["jid"]
        )
        assert list(payload.items()) == list(alone.items()), index
    assert len({p["jid"] for _, p in built}) == 3


def test_list_fields_are_each_jobs_own() -> None:
    def tag_first(name: str, job: dict[str, Any], queue: str, redis: Any, call: Any) -> Any:
        if job["args"] == [0]:
            job["tags"].append("first")
        return call()

    client = Client(
        Config(redis_url="redis://127.0.0.1:1/0", client_middleware=[tag_first])
    )
    args_list = [[0], [1]]
    built = client.prepare_bulk("app.Job", args_list, {"tags": ["t"]}, None)
    assert [p["tags"] for _, p in built] == [["t", "first"], ["t"]]
    assert [p["args"] for _, p in built] == args_list
    assert built[0][1]["args"] is not args_list[0]  # the caller's lists are not shared


def test_a_bad_argument_of_one_job_refuses_the_bulk() -> None:
    client = Client(Config(redis_url="redis://127.0.0.1:1/0"))
    with pytest.raises(ArgsNotSerializable, match=r"args\[0\] is a set"):
        client.prepare_bulk("app.Job", [[1], [{1}]], {}, None)
