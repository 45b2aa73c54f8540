"""Batches on the client side, without Redis: payloads, callbacks, the jobs() block's rules
and the canvas helpers' checks (a client on a closed port: any write would raise)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import rfetch
from rfetch.batch.callbacks import callback_fields
from rfetch.config import Config
from rfetch.errors import ArgsMismatch, BatchError, ConfigError
from rfetch.jobs.payload import Routing
from rfetch.push.batch_context import collecting
from rfetch.push.client import Client


@pytest.fixture
def client() -> Client:
    return Client(Config(redis_url="redis://127.0.0.1:1/0"))


class Work(rfetch.Job):
    def perform(self, n: int) -> None: ...


class Done(rfetch.Job):
    queue = "callbacks"

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None: ...


class Body(rfetch.Job):
    def perform(self, label: str) -> None: ...


class Unique(rfetch.Job):
    unique_for = 60.0

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None: ...


def test_pushes_inside_a_block_carry_the_bid_and_are_held(client: Client) -> None:
    batch = rfetch.Batch(client=client)
    with pytest.raises(RuntimeError, match="stop"), batch.jobs():
        jid = Work.set(client=client).perform_async(1)
        held = collecting()
        assert held is not None and held.bid == batch.bid
        [job] = held.jobs
        payload = json.loads(job.text)
        assert payload["bid"] == batch.bid and payload["jid"] == jid
        routing = Routing.parse(job.text)
        assert routing is not None and routing.batched and routing.bid == batch.bid
        raise RuntimeError("stop")  # nothing is written (a write would fail: port 1)
    assert collecting() is None
    assert batch.jids == []


def test_a_plain_payload_has_no_bid_and_no_routing(client: Client) -> None:
    payload = client.build("w.Work", [1], {}, None)
    assert "bid" not in payload
    assert Routing.parse(json.dumps(payload)) is None


def test_an_empty_first_block_is_an_error(client: Client) -> None:
    with pytest.raises(BatchError, match="no job"), rfetch.Batch(client=client).jobs():
        pass


def test_blocks_do_not_nest(client: Client) -> None:
    with pytest.raises(ConfigError, match="do not nest"), rfetch.Batch(client=client).jobs(), \
            rfetch.Batch(client=client).jobs():
        pass


@pytest.mark.parametrize("ttl", [0, -5, True, 1.5])
def test_bad_ttls_are_refused(client: Client, ttl: Any) -> None:
    with pytest.raises(ConfigError, match="ttl"):
        rfetch.Batch(ttl=ttl, client=client)


def test_callback_fields_of_a_class_with_options(client: Client) -> None:
    fields = callback_fields(client, "success", (Done, {"import_id": 7}))
    template = json.loads(fields["cb_success"])
    assert template["class"].endswith("Done") and template["queue"] == "callbacks"
    assert "args" not in template and "enqueued_at" not in template
    assert len(template["jid"]) == 24
    assert fields["cbargs_success"] == '{"import_id":7}'
    assert "cbplain_success" not in fields


def test_a_chord_body_gets_only_its_own_arguments(client: Client) -> None:
    fields = callback_fields(client, "success", Body.s("sum"))
    assert fields["cbargs_success"] == '"sum"' and fields["cbplain_success"] == "1"


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        (object, ConfigError, "job class"),
        ((Done, ["not", "a", "dict"]), ConfigError, "must be a dict"),
        ((Done, {"when": object()}), rfetch.ArgsNotSerializable, "when"),
        (Body, ArgsMismatch, "takes 1 argument"),
        (Unique, ConfigError, "unique_key"),
    ],
)
def test_bad_callbacks_are_refused(
    client: Client, spec: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        rfetch.Batch(on_success=spec, client=client)


def test_group_and_chord_check_their_signatures(client: Client) -> None:
    with pytest.raises(ConfigError, match="at least one"):
        rfetch.group(client=client)
    with pytest.raises(ConfigError, match="signatures"):
        rfetch.group(Work.s(1), "Work", client=client)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="a chord's callback is a signature"):
        rfetch.chord([Work.s(1)], Body, client=client)  # type: ignore[arg-type]


def test_fake_mode_keeps_a_batch_s_jobs_with_their_bid() -> None:
    import rfetch.testing

    with rfetch.testing.fake() as queues:
        batch = rfetch.Batch(on_success=Done)
        with batch.jobs():
            Work.perform_async(1)
            Work.perform_async(2)
        held = queues.jobs(Work)
    assert [job["args"] for job in held] == [[1], [2]]
    assert {job["bid"] for job in held} == {batch.bid} and len(batch.jids) == 2
