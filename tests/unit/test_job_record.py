"""One job's record for the Lua ending scripts (:mod:`rfetch.store.job_record`) and the one
outcome vocabulary (:mod:`rfetch.store.outcomes`): the Python side and the Lua libraries
(``lib/record.lua``, ``lib/outcome.lua``) name the same fields and the same outcomes. The Lua
files are read as text. No Redis."""

from __future__ import annotations

import json
import re
from importlib import resources

from rfetch.jobs.payload import Routing
from rfetch.store.job_record import RECORD_FIELDS, job_record, needs_record
from rfetch.store.outcomes import JobOutcome


def lua(name: str) -> str:
    return resources.files("rfetch").joinpath(f"lua/lib/{name}.lua").read_text("utf-8")


def test_a_record_holds_every_field_the_job_has_and_no_other() -> None:
    routing = Routing(jid="j1", queue="q", job_class="C", ordering_key="k", unique="d",
                      tenant="t", bid="b", store_result=60, concurrency_key="c",
                      concurrency_limit=2)
    assert json.loads(job_record("q", routing)) == {
        "q": "q", "jid": "j1", "key": "k", "unique": "d", "tenant": "t", "ck": "c",
        "limit": 2, "bid": "b", "ttl": 60, "class": "C",
    }
    pushed = json.loads(job_record("q", routing, window_ms=5000))
    assert pushed["win"] == 5000
    assert "win" not in json.loads(job_record("q", Routing(jid="j"), window_ms=5000))
    assert json.loads(job_record("q", Routing(jid="j2"))) == {"q": "q", "jid": "j2"}
    # the class is for a recorded outcome only (store_result)
    assert json.loads(job_record("q", Routing(jid="j3", job_class="C", bid="b"))) == {
        "q": "q", "jid": "j3", "bid": "b"}
    assert json.loads(job_record("é", None)) == {"q": "é"}


def test_a_waiting_job_s_record_names_what_it_waits_on() -> None:
    text = job_record("q", Routing(jid="j", store_result=60, job_class="C"), after="a" * 24)
    assert json.loads(text) == {"q": "q", "jid": "j", "ttl": 60, "class": "C", "after": "a" * 24}
    assert "after" not in json.loads(job_record("q", Routing(jid="j"), after=None))


def test_a_concurrency_key_without_a_limit_is_not_a_cap() -> None:
    assert "ck" not in json.loads(job_record("q", Routing(jid="j", concurrency_key="c")))


def test_the_record_is_one_compact_text() -> None:
    text = job_record("q", Routing(jid="j", ordering_key="k"))
    assert text == '{"q":"q","jid":"j","key":"k"}'


def test_only_jobs_that_release_or_count_something_need_a_record() -> None:
    assert not needs_record(None)
    assert not needs_record(Routing(jid="j", tenant="t"))
    assert needs_record(Routing(jid="j", bid="b"))
    assert needs_record(Routing(jid="j", unique="d"))


def test_lua_reads_the_same_record_fields() -> None:
    match = re.search(r"local RECORD_FIELDS = \{([^}]*)\}", lua("record"))
    assert match is not None
    assert tuple(re.findall(r"'(\w+)'", match.group(1))) == RECORD_FIELDS


def test_lua_knows_every_outcome_and_no_other() -> None:
    text = lua("outcome")
    block = text[text.index("local OUTCOME_EFFECTS = {") : text.index("\n}\n")]
    names = set(re.findall(r"^  (\w+) += \{", block, re.MULTILINE))
    assert names == {o.value for o in JobOutcome}


def test_a_retry_keeps_the_ordering_key_and_deaths_count_in_the_batch() -> None:
    text = lua("outcome")
    effects = dict(re.findall(r"^  (\w+) += (\{[^}]*\})", text, re.MULTILINE))
    assert "gate = 'keep'" in effects["failed"]
    for death in ("died", "discarded", "expired", "poison", "cancelled"):
        assert "batch = 'dead'" in effects[death], death
    assert "batch" not in effects["rescheduled"]
