"""``lib/record.lua``'s ``record_of_job`` (the record a script makes of a payload it reads
itself: ``enqueue_due.lua``'s due jobs, ``cancel_waiting.lua``'s waiting job) gives the
fields ``rfetch.store.job_record.job_record(queue, Routing.of(payload))`` gives, with the
keys they name derived in the namespace; checked on the session redis-server."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
import redis

from rfetch.jobs.payload import Routing
from rfetch.store.job_record import RECORD_FIELDS, job_record
from rfetch.store.keys import Keys

LIBS = ("keys", "guard", "gate", "cap", "record")
"""The libraries record.lua needs, in include order (their "-- #include" lines are Lua
comments, so plain concatenation loads them)."""

PROBE = """
local ok, job = pcall(cjson.decode, ARGV[1])
local rec = record_of_job(KEYS[1], job)
local out = {}
for _, f in ipairs(RECORD_FIELDS) do out[f] = rawget(rec, f) end
for _, k in ipairs({'klist', 'lock', 'bhash'}) do out[k] = rawget(rec, k) end
out.C = rawget(rec, 'C') and rawget(rec, 'C').held or nil
out.holders = rec.G.holders
return cjson.encode(out)
"""
"""Returns the record's fields, the keys it derived (the cap keys by their held hash) and
its lazily derived gate's holders hash."""

BASE = {"queue": "q", "class": "Work", "args": [1], "jid": "j1"}

PAYLOADS: list[dict[str, Any]] = [
    BASE,
    {**BASE, "ordering_key": "k"},
    {**BASE, "ordering_key": "", "tenant": ""},
    {**BASE, "ordering_key": 7, "tenant": 3},
    {**BASE, "tenant": "acme", "unique_key": "d1"},
    {**BASE, "concurrency_key": "acct", "concurrency_limit": 2},
    {**BASE, "concurrency_key": "acct", "concurrency_limit": 0},
    {**BASE, "concurrency_key": "acct"},
    {**BASE, "bid": "b1", "store_result": 60},
    {**BASE, "store_result": 0, "bid": ""},
    {**BASE, "jid": ""},
    {"queue": "é", "class": "Work", "jid": "j2", "store_result": 5, "ordering_key": "k:2"},
]


def lua_source() -> str:
    lib = resources.files("rfetch").joinpath("lua/lib")
    return "\n".join(lib.joinpath(f"{name}.lua").read_text("utf-8") for name in LIBS) + PROBE


@pytest.mark.parametrize("namespace", [None, "ns"])
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: json.dumps(p, sort_keys=True))
def test_record_of_job_is_job_record_of_the_payload(
    r: redis.Redis, namespace: str | None, payload: dict[str, Any]
) -> None:
    keys = Keys(namespace)
    got = json.loads(r.eval(lua_source(), 1, keys.prefix, json.dumps(payload)))
    q, routing = payload["queue"], Routing.of(payload)
    want = {name: str(value) for name, value in json.loads(job_record(q, routing)).items()}
    assert {name: got.pop(name) for name in RECORD_FIELDS if name in got} == want
    assert got.pop("holders") == keys.key_holders(q)
    assert got.pop("klist", None) == (
        keys.key_list(q, routing.ordering_key) if routing.ordering_key else None)
    assert got.pop("lock", None) == (keys.unique(routing.unique) if routing.unique else None)
    assert got.pop("bhash", None) == (keys.batch(routing.bid) if routing.bid else None)
    assert got.pop("C", None) == (keys.cap_held(q) if routing.capped else None)
    assert got == {}
