"""Jobs that wait (after=): a waiting job that will never run ends through lib/outcome.lua's
job_end like any other job, however long the chain behind it; and a job with after= cannot
join a batch's jobs() block, whose counters would not count it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import rfetch
from rfetch.api import Api
from rfetch.config import Config
from rfetch.errors import ConfigError, JobDied
from tests.support.gate_worker import Worker, running

RUNS: list[list[Any]] = []
FAILS: set[str] = set()


class Step(rfetch.Job):
    """Fails for good when its name is in FAILS."""

    queue = "q"
    retry = 0

    def perform(self, name: str) -> str:
        RUNS.append([name])
        if name in FAILS:
            raise ValueError(f"step {name} fails")
        return name


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    RUNS.clear()
    FAILS.clear()
    yield


@pytest.fixture
def worker(cfg: Config) -> Iterator[Worker]:
    """The harness's worker (tests.support.gate_worker's ``cfg``) running ``Step``."""
    with running(cfg, [Step]) as w:
        yield w


def test_a_job_with_after_is_refused_inside_a_batch_block(worker: Worker, r: redis.Redis) -> None:
    first = Step.set(client=worker.client).perform_async("first")
    batch = rfetch.Batch("would not count it", client=worker.client)
    with pytest.raises(ConfigError, match="cannot join a batch's jobs"), batch.jobs():
        Step.set(client=worker.client).perform_async("member")
        Step.set(client=worker.client, after=first).perform_async("w")
    with pytest.raises(ConfigError, match="cannot join a batch's jobs"), batch.jobs():
        rfetch.chain(Step.s("a"), Step.s("b"), client=worker.client)
    assert r.exists(f"b-{batch.bid}") == 0 and r.hlen("rfetch:waiting") == 0
    assert r.llen("queue:q") == 1  # "first" alone: nothing of either block was written


def test_a_long_chain_behind_a_dead_link_ends_in_one_call(worker: Worker, r: redis.Redis) -> None:
    FAILS.add("0")
    links = [Step.s(str(i)).set(store_result=60) for i in range(300)]
    jids = rfetch.chain(*links, client=worker.client).jids
    worker.drain()
    assert RUNS == [["0"]]
    dead = {json.loads(raw)["jid"]: json.loads(raw) for raw in r.zrange("dead", 0, -1)}
    assert set(dead) == set(jids)
    assert f"dependency {jids[0]} died" in dead[jids[1]]["error_message"]
    assert f"dependency {jids[298]} was dead" in dead[jids[299]]["error_message"]
    assert r.hlen("rfetch:waiting") == 0
    assert not r.keys("rfetch:dependents:*")
    with pytest.raises(JobDied, match="DependencyFailed"):
        rfetch.result(jids[299], 0, worker.client)


@pytest.mark.parametrize("dead", [False, True])
def test_cancelling_a_job_waiting_on_a_batch_settles_the_jobs_behind_it(
    worker: Worker, r: redis.Redis, dead: bool
) -> None:
    batch = rfetch.Batch("still running", client=worker.client)
    with batch.jobs():
        Step.set(client=worker.client).perform_async("member")
    waiter = Step.set(client=worker.client, after=batch, store_result=60).perform_async("w")
    behind = Step.set(client=worker.client, after=waiter).perform_async("behind")
    assert waiter is not None and behind is not None
    answer = Api(worker.config, redis=worker.redis).cancel(waiter, dead=dead)
    assert answer.state == "deleted", answer.text
    assert f"waiting on batch {batch.bid}" in answer.text and "1 job(s) waiting" in answer.text
    with pytest.raises(JobDied, match="JobCancelled") as ended:
        rfetch.result(waiter, 0, worker.client)
    assert ended.value.status == ("dead" if dead else "cancelled")
    buried = {json.loads(raw)["jid"] for raw in r.zrange("dead", 0, -1)}
    assert buried == ({waiter, behind} if dead else {behind})
    assert r.hlen("rfetch:waiting") == 0 and r.llen(f"b-{batch.bid}-waiting-success") == 0
    worker.drain()
    assert RUNS == [["member"]]
