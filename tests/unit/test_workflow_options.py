"""The workflow options, result values and progress arguments, checked without Redis."""

from __future__ import annotations

from typing import Any

import pytest

import rfetch
from rfetch.errors import ConfigError, JobDied, ResultNotSerializable
from rfetch.jobs.options import check_options
from rfetch.jobs.payload import Routing
from rfetch.jobs.workflow_options import after_as_id
from rfetch.worker.outcome import result_text
from rfetch.workflow.progress import check_progress
from rfetch.workflow.record import Record

JID = "0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"store_result": 0}, "store_result must be"),
        ({"store_result": True}, "store_result must be"),
        ({"store_result": 1.5}, "store_result must be"),
        ({"store_result": 10**9}, "store_result must be"),
        ({"after": "nope"}, "after must be a jid"),
        ({"after": JID.upper()}, "after must be a jid"),
        ({"after": JID, "key": "k"}, "ordering-key gate"),
        ({"after": JID, "jid": JID}, "cannot wait on itself"),
        ({"after": JID, "unique_for": 5}, "ordering-key gate"),
        ({"after": JID, "after_outcome": "maybe"}, "after_outcome must be"),
        ({"after": JID, "on_dependency_death": "ignore"}, "on_dependency_death must be"),
    ],
)
def test_bad_workflow_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_options(options)


def test_good_workflow_options_pass() -> None:
    check_options({"store_result": 60, "after": JID, "after_outcome": "complete",
                   "on_dependency_death": "cancel"})


def test_a_batch_object_is_taken_as_its_bid() -> None:
    class FakeBatch:
        bid = JID

    assert after_as_id({"after": FakeBatch(), "queue": "q"}) == {"after": JID, "queue": "q"}
    assert after_as_id({"after": JID}) == {"after": JID}


def test_result_values_must_be_native_json() -> None:
    assert result_text({"a": [1, 2.5, None, True, "é"]}) == '{"a":[1,2.5,null,true,"é"]}'
    with pytest.raises(ResultNotSerializable, match=r"result\['when'\] is"):
        result_text({"when": object()})
    with pytest.raises(ResultNotSerializable, match="result"):
        result_text(float("nan"))


def test_progress_arguments_are_checked() -> None:
    check_progress(0, "")
    check_progress(100.0, "done")
    for bad in (-1, 101, float("nan"), True, "50"):
        with pytest.raises(ConfigError, match="percent"):
            check_progress(bad, "")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="message"):
        check_progress(5, 7)  # type: ignore[arg-type]


def test_progress_outside_a_worker_only_checks() -> None:
    class Job(rfetch.Job):
        name = "unit.ProgressJob"

        def perform(self) -> None: ...

    Job().progress(10, "ok")
    with pytest.raises(ConfigError):
        Job().progress(200)


def test_routing_reads_store_result_and_plain_jobs_are_not_parsed() -> None:
    plain = b'{"class":"A","args":[],"jid":"' + JID.encode() + b'","queue":"q"}'
    assert Routing.parse(plain) is None
    recorded = plain[:-1] + b',"store_result":60}'
    routing = Routing.parse(recorded)
    assert routing is not None and routing.store_result == 60 and not routing.locking


def test_records_decode_and_raise_on_death() -> None:
    ok = Record.of(JID, {b"status": b"succeeded", b"result": b"[1,2]", b"class": b"A",
                         b"finished_at": b"12.5"})
    assert ok is not None and ok.value_or_raise() == [1, 2] and ok.finished_at == 12.5
    dead = Record.of(JID, {"status": "dead", "error_class": "ValueError",
                           "error_message": "boom"})
    assert dead is not None
    with pytest.raises(JobDied, match="ValueError: boom") as died:
        dead.value_or_raise()
    assert died.value.status == "dead"
    assert Record.of(JID, {}) is None


def test_result_refuses_a_client_of_several_shards() -> None:
    from rfetch.config import Config
    from rfetch.push.client import Client

    client = Client(Config(shards=["redis://127.0.0.1:1/0", "redis://127.0.0.1:2/0"]))
    with pytest.raises(ConfigError, match="shards"):
        rfetch.result(JID, 0, client)
    with pytest.raises(ConfigError, match="timeout"):
        rfetch.result(JID, -1, client)
