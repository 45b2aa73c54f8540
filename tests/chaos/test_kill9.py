"""Chaos, CI tier (kill -9 recovery): SIGKILL of workers and of Redis while jobs run.

5,000 jobs, 3 worker processes, a random worker SIGKILLed about every 2 s (a replacement is
started each time) until every job has finished, and Redis (AOF, ``appendfsync always``)
SIGKILLed and restarted on the same port when half of the jobs are done. Evidence of each
run is written by the jobs outside Redis (``tests/jobs/chaos_jobs.py``).

Pass: no job lost; every key clean at the end; duplicates counted, printed, and at most the
number of jobs the killed processes held (concurrency + prefetch each); and no job run
twice unless a process that ran it before was SIGKILLed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.chaos import ChaosPlan, run_chaos
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.slow


def test_kill9_of_workers_and_redis_loses_nothing(
    own_redis: RedisServer, tmp_path: Path, say: Callable[[str], None]
) -> None:
    plan = ChaosPlan(jobs=5000, workers=3, concurrency=5, kill_every=2.0, kill_redis=True)
    result = run_chaos(plan, own_redis, tmp_path, say)
    say(result.summary())

    assert result.lost == [], f"{len(result.lost)} job(s) lost: {result.lost[:10]}"
    assert result.drained
    assert result.leftovers == {}
    assert result.unexpected_exits == []
    assert result.exit_codes == [0] * plan.workers
    # The faults really happened: several kills, and Redis went down once.
    assert len(result.kills) >= 5
    assert result.redis_killed_at is not None
    assert result.evidence.duplicates() <= result.duplicate_bound
    assert result.evidence.reruns() <= result.duplicate_bound
    # Every job that ran twice was held by a worker that was SIGKILLed before: the Redis
    # kill and the recoveries add no re-run of their own.
    assert result.evidence.unexplained_reruns(pid for pid, _ in result.kills) == []
