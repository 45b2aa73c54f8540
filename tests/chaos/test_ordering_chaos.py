"""Chaos, CI tier, for ordering keys: the benchmark's order run, smaller.

1,000 jobs of 20 ms over 40 keys, 3 worker processes x 5 threads, a random worker
SIGKILLed every 1.5 s (a replacement started each time), 10% of jobs failing once. From
the jobs' own evidence: for every key the first successful runs follow enqueue order, no
two runs of a key overlap in time (a run cut by SIGKILL ends at the kill), and no job is
lost.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.ordering_run import OrderPlan, run_order_chaos
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.slow


def test_order_per_key_survives_kills_and_retries(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    plan = OrderPlan(keys=40, per_key=25, workers=3, concurrency=5, kill_every=1.5, job_ms=20,
                     timeout=120.0)
    result = run_order_chaos(own_redis.url, tmp_path, plan, say)
    say(result.summary())
    report = result.report
    assert result.drained
    assert report.lost == []
    assert report.out_of_order == [], report.out_of_order[:5]
    assert report.overlaps == [], report.overlaps[:5]
    # Each job set to fail once failed once, unless a SIGKILL fell between its failure
    # marker and its "fail" line (its rerun then succeeds).
    assert result.failing - len(result.kills) <= report.failed_runs <= result.failing
    assert len(result.kills) >= 3
    assert result.gate_left == {}
