"""Fetch caps (concurrency keys), step by step against a real redis-server: at most N jobs
of a key are fetched and unfinished at once, the others wait unfetched; every way out of a
private list gives the slot back (ack, settle, push-back, orphan recovery), and the
invariant "a key is in the ready ring iff it has waiting jobs and a free slot" holds."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from tests.support.gate_worker import FAIL, Step, Worker, make_due

pytestmark = pytest.mark.usefixtures("clear_runs")


def push(w: Worker, key: str | None, *args: Any, limit: int = 2, **opts: Any) -> str:
    options: dict[str, Any] = dict(opts)
    if key is not None:
        options.update(concurrency_key=key, concurrency_limit=limit)
    jid = Step.set(client=w.client, **options).perform_async(*args)
    assert jid is not None
    return jid


def names(units: list[Any]) -> list[Any]:
    return [json.loads(u.raw)["args"][0] for u in units]


def assert_clean(r: redis.Redis) -> None:
    """Nothing held, nothing waiting, an empty ring."""
    assert r.exists("rfetch:cap:q", "rfetch:cap-held:q", "rfetch:cap-slots:q") == 0
    assert list(r.scan_iter(match="rfetch:cap:q|*")) == []


def test_at_most_limit_are_fetched_and_an_ack_lets_the_next_one_out(
    worker: Worker, r: redis.Redis
) -> None:
    for i in range(5):
        push(worker, "t42", f"a{i}")
    push(worker, None, "plain")
    assert r.llen("queue:q") == 1  # capped jobs wait in their key's list, not the queue
    first = worker.fetch.retrieve_work(10)
    assert sorted(names(first)) == ["a0", "a1", "plain"]
    assert worker.fetch.retrieve_work(10) == []  # the key is full: nothing more is fetched
    assert r.hget("rfetch:cap-held:q", "t42") == b"2"
    capped = [u for u in first if names([u]) != ["plain"]]
    worker.processor.process(capped[0])
    assert names(worker.fetch.retrieve_work(10)) == ["a2"]
    assert worker.fetch.retrieve_work(10) == []
    for unit in [capped[1], *first]:
        if names([unit]) != ["plain"] and unit is not capped[0]:
            worker.processor.process(unit)
    assert worker.drain() == 2 + 1  # a2 (fetched above, processed by drain? no) guard
