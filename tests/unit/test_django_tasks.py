"""RfetchBackend's pieces that need no Redis and no Django project: its options, the
payload of a task, the attempts hash decoded, the status and errors mapping, the
allow-list (the end-to-end tests are tests/django_app/test_tasks.py)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("django")
pytest.importorskip("rfetch.integrations.django.tasks.compat")

from rfetch.api.location import Explanation, Location
from rfetch.api.records import JobRecord
from rfetch.errors import ConfigError
from rfetch.integrations.django.tasks import compat
from rfetch.integrations.django.tasks.backend import BackendOptions
from rfetch.integrations.django.tasks.results import ResultReader, _errors, _status
from rfetch.integrations.django.tasks.runner import (
    JOB_NAME,
    TaskRegistry,
    UnknownTask,
    task_call,
)
from rfetch.integrations.django.tasks.runs import Attempts
from rfetch.store.keys import Keys
from rfetch.workflow.record import Record


def test_options_have_defaults_and_refuse_bad_values() -> None:
    assert BackendOptions.parse({}) == BackendOptions()
    assert BackendOptions.parse({"retry": 3, "result_ttl": 60}).retry == 3
    for bad in ({"result_ttl": 0}, {"result_ttl": True}, {"retry": -1}, {"retry": "x"},
                {"max_scan": 0}, {"priority": 1}, {"on_commit": "yes"}):
        with pytest.raises(ConfigError):
            BackendOptions.parse(bad)


def test_a_task_payload_is_path_args_kwargs() -> None:
    assert task_call({"args": ["m.f", [1], {"a": 2}]}) == ("m.f", [1], {"a": 2})
    for bad in ([], ["m.f", [1]], [1, [], {}], ["m.f", {}, {}], ["m.f", [], []], None):
        with pytest.raises(ValueError):
            task_call({"args": bad})


def test_attempts_are_decoded_and_foreign_hashes_ignored() -> None:
    found = Attempts.of({b"task": b"m.f", b"args": b"[1]", b"kwargs": b"{}",
                         b"worker_ids": b'["h:1"]', b"started_at": b"12.5",
                         b"state": b"running"})
    assert found == Attempts("m.f", [1], {}, None, 12.5, None, ["h:1"], [], "running")
    assert Attempts.of({}) is None
    assert Attempts.of({"task": "m.f", "args": "not json"}) is None


def test_statuses_follow_the_record_then_the_attempts() -> None:
    running = Attempts("m.f", state="running")
    failed = Attempts("m.f", errors=[{"exception_class_path": "builtins.ValueError",
                                      "traceback": "tb"}], state="failed")
    assert _status(Record("j", "succeeded", 5), running) == compat.SUCCESSFUL
    assert _status(Record("j", "dead"), failed) == compat.FAILED
    assert _status(Record("j", "cancelled"), running) == compat.FAILED
    assert _status(None, running) == compat.RUNNING
    assert _status(None, failed) == compat.READY  # waiting for its retry
    assert _status(None, Attempts("m.f")) == compat.READY  # not started


def test_a_death_the_worker_did_not_see_adds_rfetchs_error() -> None:
    killed = Attempts("m.f", state="running")
    [error] = _errors(Record("j", "dead", None, "JobTimeout", "too long"), killed)
    assert error.exception_class_path == "builtins.JobTimeout"
    assert error.traceback == "JobTimeout: too long"
    seen = Attempts("m.f", errors=[{"exception_class_path": "x.E", "traceback": "tb"}],
                    state="failed")
    assert [e.traceback for e in _errors(Record("j", "dead", None, "x.E", "m"), seen)] == ["tb"]
    assert _errors(Record("j", "succeeded", 1), Attempts("m.f", state="finished")) == []


def test_the_allow_list_refuses_what_it_does_not_hold() -> None:
    with pytest.raises(UnknownTask, match="add its module with -r"):
        TaskRegistry([]).get("os.system")


class _Redis:
    def hgetall(self, key: str) -> dict[str, str]:
        return {}  # no record


class _Api:
    """explain misses the job once (it moved between two of the places it looks at)."""

    def __init__(self) -> None:
        self.redis, self.keys, self.calls = _Redis(), Keys(""), 0

    def explain(self, jid: str, max_scan: int | None = None) -> Explanation:
        self.calls += 1
        if self.calls == 1:
            return Explanation(jid)
        payload = {"class": JOB_NAME, "jid": jid, "args": ["m.f", [1], {}], "enqueued_at": 5.0}
        record = JobRecord(json.dumps(payload).encode(), "queue:default")
        return Explanation(jid, [Location("held", "held", job=record)])


class _Runs:
    def read(self, jid: str) -> None:
        return None  # not started


def test_a_task_missed_once_while_it_moves_is_looked_for_again() -> None:
    api = _Api()
    reader = ResultReader(api, _Runs(), "default", 100)  # type: ignore[arg-type]
    record, attempts = reader._look("a" * 24)
    assert record is None and attempts == Attempts("m.f", [1], {}, 5.0)
    assert api.calls == 2
