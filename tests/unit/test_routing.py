"""The one parse of a payload's routing fields (``rfetch.jobs.payload.Routing``): the same answer
to "keyed / unique / tenant / coalesced?" as ``lib/gate.lua``'s ``gate_fields``. No Redis."""

from __future__ import annotations

import json

import pytest

from rfetch.jobs.payload import Routing, may_be_gated


def test_a_plain_payload_has_no_routing() -> None:
    raw = b'{"class":"X","args":[1],"queue":"q","jid":"j1"}'
    assert not may_be_gated(raw)
    assert Routing.parse(raw) is None


def test_every_field_is_read() -> None:
    payload = {
        "class": "X",
        "queue": "q",
        "jid": "j1",
        "args": [],
        "ordering_key": "k",
        "unique_key": "d",
        "tenant": "t",
        "coalesce": "last",
        "score": 3,
        "unique_until": 1700000000.5,
    }
    routing = Routing.parse(json.dumps(payload).encode())
    assert routing == Routing(
        jid="j1",
        queue="q",
        job_class="X",
        ordering_key="k",
        unique="d",
        tenant="t",
        coalesce="last",
        score=3.0,
        unique_until=1700000000.5,
    )
    assert routing.gated and routing.locking and routing.coalesced


@pytest.mark.parametrize(
    ("fields", "gated", "locking"),
    [
        ({"ordering_key": "k"}, True, True),
        ({"unique_key": "d"}, True, True),
        ({"tenant": "t"}, True, False),  # the gate routes it; nothing to release
        ({"ordering_key": ""}, False, False),  # gate.lua: only non-empty strings count
        ({"tenant": None}, False, False),
        ({"unique_key": 7}, False, False),
    ],
)
def test_gated_and_locking_follow_gate_lua(
    fields: dict[str, object], gated: bool, locking: bool
) -> None:
    raw = json.dumps({"class": "X", "jid": "j", **fields})
    routing = Routing.parse(raw)
    assert routing is not None  # the text names a gate field: parsed
    assert (routing.gated, routing.locking) == (gated, locking)


def test_the_text_and_bytes_forms_agree() -> None:
    text = '{"class":"X","tenant":"t","jid":"j"}'
    assert may_be_gated(text) and may_be_gated(text.encode())
    assert Routing.parse(text) == Routing.parse(text.encode())


@pytest.mark.parametrize(
    "raw", [b'{"tenant": "t"', b'["tenant", "ordering_key"]', b'"unique_key"', b"\xff tenant"]
)
def test_an_unreadable_payload_is_plain(raw: bytes) -> None:
    assert Routing.parse(raw) is None


@pytest.mark.parametrize(
    ("value", "coalesce", "coalesced"),
    [(True, True, True), ("last", "last", True), (1, True, True), (False, None, False)],
)
def test_coalesce_needs_an_ordering_key(
    value: object, coalesce: object, coalesced: bool
) -> None:
    keyed = Routing.of({"ordering_key": "k", "coalesce": value})
    assert (keyed.coalesce, keyed.coalesced) == (coalesce, coalesced)
    assert not Routing.of({"coalesce": value}).coalesced


@pytest.mark.parametrize(
    ("payload", "score"),
    [
        ({"score": 5, "created_at": 1.0}, 5.0),
        ({"score": True, "created_at": 2.0}, 2.0),  # a bool is not a score
        ({"created_at": 1700000000123, "enqueued_at": 9.0}, 1700000000.123),  # Sidekiq 8 ms
        ({"enqueued_at": 9.0}, 9.0),
        ({}, 0.0),
    ],
)
def test_the_batch_score_falls_back_to_push_times(
    payload: dict[str, object], score: float
) -> None:
    assert Routing.of(payload).score == pytest.approx(score)
