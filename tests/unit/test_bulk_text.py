"""A bulk push with no client middleware and options alike encodes its jobs by splicing
each one's args and jid into the template's text (rfetch.push.bulk_text): every text must be
what encoding that job's payload whole gives, byte for byte, and the same checks must refuse
the same jobs. The client points at a port nobody listens on: nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rfetch.config import Config
from rfetch.errors import ArgsNotSerializable, ConfigError, PayloadTooLarge
from rfetch.jobs import payload as payload_module
from rfetch.push.client import Client
from rfetch.push.delivery import outgoing

OPTION_SETS: list[dict[str, Any]] = [
    {},
    {"queue": "mail", "retry": 3, "dead": False, "backtrace": 5},
    {"tags": ["a", "b"], "retry_queue": "slow", "timeout": 30, "expires_in": 60},
    {"key": "acct-1"},
    {"tenant": "t1", "score": 2},
    {"priority": 5},
    {"queue": '"tenant"'},
]
ARGS_LIST: list[Any] = [
    [1, {"x": [2]}],
    ["two", "é\u2028"],
    [],
    (3, 4.5),
    [2**70],  # beyond 64 bits: orjson refuses it, the standard encoder writes it
    [1.0e16, -0.0, None, True],
]


def client() -> Client:
    return Client(Config(redis_url="redis://127.0.0.1:1/0"))


@pytest.mark.parametrize("options", OPTION_SETS)
@pytest.mark.parametrize("at", [None, 4_000_000_000.0, 1.0])
def test_each_spliced_text_is_the_whole_payload_encoded(
    options: dict[str, Any], at: float | None
) -> None:
    c = client()
    bulk = c.bulk("app.Job", ARGS_LIST, options, at, None, None)
    assert list(bulk.positions) == list(range(len(ARGS_LIST)))
    assert len(set(bulk.all_jids)) == len(ARGS_LIST)
    for args, jid, job in zip(ARGS_LIST, bulk.all_jids, bulk.jobs, strict=True):
        stored = json.loads(job.text)
        alone = c.build("app.Job", args, options, at, now=stored["created_at"], jid=jid)
        for name in ("enqueued_at", "expires_at"):
            if name in alone:
                alone[name] = stored[name]
        [whole] = c.serialized([alone])
        assert job.text == whole.text
        assert (job.queue, job.at) == (whole.queue, whole.at)
        assert outgoing([job]) == outgoing([whole])


@pytest.mark.skipif(
    payload_module._fast_dumps is None,
    reason="the spliced path needs orjson (a default dependency); without it each payload "
    "is built whole, as the next test checks",
)
def test_jobs_of_a_template_without_routing_fields_are_marked_plain() -> None:
    c = client()
    assert all(job.plain for job in c.bulk("app.Job", [[1]], {}, None, None, None).jobs)
    for options in ({"key": "k"}, {"tenant": "t"}, {"priority": 3}):
        bulk = c.bulk("app.Job", [[1]], options, None, None, None)
        assert not any(job.plain for job in bulk.jobs)


def test_without_orjson_each_payload_is_built_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(payload_module, "_fast_dumps", None)
    bulk = client().bulk("app.Job", [[1], [2]], {}, None, None, None)
    assert [json.loads(job.text)["args"] for job in bulk.jobs] == [[1], [2]]
    assert not any(job.plain for job in bulk.jobs)


def test_the_same_checks_refuse_the_same_jobs() -> None:
    c = client()
    with pytest.raises(ArgsNotSerializable, match=r"args\[0\] is a set"):
        c.bulk("app.Job", [[1], [{1}]], {}, None, None, None)
    with pytest.raises(ArgsNotSerializable, match="JSON cannot represent"):
        c.bulk("app.Job", [[float("nan")]], {}, None, None, None)
    with pytest.raises(ConfigError, match="list of argument lists"):
        c.bulk("app.Job", [[1], "x"], {}, None, None, None)
    with pytest.raises(ConfigError, match="jid cannot be given"):
        c.bulk("app.Job", [[1]], {"jid": "x"}, None, None, None)
    # every item is checked before any is encoded: a bad argument wins over a large job
    small = Client(Config(redis_url="redis://127.0.0.1:1/0", max_payload_bytes=200))
    with pytest.raises(ArgsNotSerializable):
        small.bulk("app.Job", [["x" * 300], [{1}]], {}, None, None, None)
    with pytest.raises(PayloadTooLarge, match=r"job app\.Job jid=\w{24} is \d+ bytes"):
        small.bulk("app.Job", [[1], ["x" * 300]], {}, None, None, None)
