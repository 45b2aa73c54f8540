from __future__ import annotations

import datetime as dt
import math

import pytest

from rfetch.errors import ArgsNotSerializable, InvalidJob, PayloadTooLarge
from rfetch.jobs.payload import check_args, dumps, epoch_seconds, loads, new_jid


def test_jid_is_24_hex() -> None:
    jid = new_jid()
    assert len(jid) == 24
    int(jid, 16)
    assert new_jid() != jid


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ([dt.datetime(2020, 1, 1)], "args[0]"),
        ([1, {"when": {1, 2}}], "args[1]['when']"),
        ([{1: "int key"}], "args[0]"),
        ([(1, 2)], "args[0]"),
        ([float("nan")], "args[0]"),
    ],
)
def test_non_json_args_name_the_bad_value(value: list[object], path: str) -> None:
    with pytest.raises(ArgsNotSerializable) as info:
        check_args(value)
    assert path in str(info.value)
    assert isinstance(info.value, TypeError)


def test_json_native_args_pass() -> None:
    check_args([1, 2.5, "s", True, None, [1, [2]], {"a": {"b": [None]}}])


def test_dumps_refuses_oversized_payload() -> None:
    with pytest.raises(PayloadTooLarge, match="over the limit of 100 bytes"):
        dumps({"class": "X", "args": ["x" * 200]}, 100)


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "json"])
def test_dumps_is_compact_exact_json_with_or_without_orjson(
    fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    import rfetch.jobs.payload as payload_module

    if not fast:
        monkeypatch.setattr(payload_module, "_fast_dumps", None)
    elif payload_module._fast_dumps is None:
        pytest.skip("orjson is not installed")
    job = {"class": "X", "args": ["é☃", 2**63 - 1, 1.5, None, True, {"k": []}], "jid": "a"}
    text = dumps(job, 1 << 20)
    assert json.loads(text) == job
    assert "é☃" in text and ", " not in text and ": " not in text
    # An integer beyond 64 bits (orjson refuses it) is written exactly by the fallback.
    big = {"class": "X", "args": [2**70]}
    assert json.loads(dumps(big, 1 << 20)) == big
    with pytest.raises(PayloadTooLarge, match="over the limit of 20 bytes"):
        dumps({"class": "X", "args": ["☃" * 10]}, 20)


def test_epoch_seconds_reads_sidekiq_8_milliseconds() -> None:
    assert epoch_seconds(1_700_000_000.5) == 1_700_000_000.5
    assert epoch_seconds(1_700_000_000_500) == 1_700_000_000.5
    assert epoch_seconds("x") is None
    assert epoch_seconds(True) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"args": []}', "no 'class'"),
        (b'{"class": "X", "args": {"a": 1}}', "not a list"),
    ],
)
def test_loads_rejects_bad_shapes(raw: bytes, message: str) -> None:
    with pytest.raises(InvalidJob, match=message):
        loads(raw)


def test_loads_reads_what_pythons_json_reads_with_or_without_orjson() -> None:
    """orjson (the speed-up extra) refuses NaN and integers over 64 bits; the standard parser
    takes over, so a worker with the extra runs exactly the jobs one without it runs."""
    job = loads('{"class":"a.B","args":[NaN, 123456789012345678901234567890],"jid":"x"}')
    assert math.isnan(job["args"][0])
    assert job["args"][1] == 123456789012345678901234567890
    assert loads(b'{"class":"a.B","args":[1]}')["args"] == [1]
