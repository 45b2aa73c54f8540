"""Chaos, slow tier: an iterable job over 100,000 items in a 2-process swarm, interrupted
at least 20 times in turn by kill -9 of the child running it, a TERM to that child while an
item runs past ``-t``, a USR2 rolling restart, and a ``--max-memory`` recycle (the item
takes 300 MB). Each item's side effect is counted in Redis by item id
(``tests/jobs/durable_jobs.py``, ``ChaosWalk``).

Pass: every item processed; the cursor an execution resumes from never moves backwards,
nor does the saved cursor sampled meanwhile; the items re-processed after each interruption
(the last item started before it minus the cursor it resumed from) stay within what the
job does in one checkpoint interval (1 s) plus the item in flight, with margin for the
loaded machine; the figures are printed.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

import rfetch
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, JOBS_DIR, WorkerProcess

pytestmark = pytest.mark.slow

ITEMS = 100_000
KINDS = ("kill -9", "TERM past -t", "USR2", "--max-memory")
ROUNDS = 5
"""Interruptions: ROUNDS of each kind, 20 in all."""


@pytest.fixture(autouse=True)
def _jobs_on_path(monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer) -> None:
    monkeypatch.syspath_prepend(str(JOBS_DIR))
    monkeypatch.setenv("REDIS_URL", redis_server.url)


def _owner(r: redis.Redis) -> tuple[int, int]:
    raw = r.get("chaos:owner")
    pid, item = (raw or b"0 -1").decode().split()
    return int(pid), int(item)


class Harness:
    """The swarm, the job's saved cursors as sampled, and the interruptions made."""

    def __init__(self, r: redis.Redis, swarm: WorkerProcess, jid: str) -> None:
        self.r, self.swarm, self.jid = r, swarm, jid
        self.cursors: list[int] = []
        self.done: list[str] = []

    def sample(self) -> None:
        raw = self.r.hget(f"it-{self.jid}", "c")
        value = json.loads(raw) if raw is not None else None
        if isinstance(value, int):
            self.cursors.append(value)

    def complete(self) -> bool:
        self.sample()
        return self.r.get("chaos:complete") is not None

    def interrupt(self, kind: str) -> None:
        """One interruption of the process running the job; then wait until it runs again."""
        r = self.r
        time.sleep(1.5)
        self.sample()
        before = r.llen("chaos:resumes")
        r.set("chaos:cause", kind.replace(" ", "_"))
        try:
            if kind == "kill -9":
                os.kill(_owner(r)[0], signal.SIGKILL)
            elif kind == "TERM past -t":
                r.set("chaos:slow", 1)
                wait_for(lambda: not r.exists("chaos:slow"), 30, self.swarm.log)
                os.kill(_owner(r)[0], signal.SIGTERM)
        except ProcessLookupError:
            return  # it had just exited: not an interruption of ours
        if kind == "USR2":
            self.swarm.signal(signal.SIGUSR2)
        elif kind == "--max-memory":
            r.set("chaos:bloat", 1)
        self.done.append(kind)
        wait_for(lambda: self.complete() or r.llen("chaos:resumes") > before, 120,
                 self.swarm.log)


def test_an_iterable_job_survives_twenty_interruptions(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, say: Callable[[str], None]
) -> None:
    import durable_jobs

    env = {**FAST_ENV, "RFETCH_POISON_MAX_RECOVERIES": "1000"}
    swarm = WorkerProcess(
        redis_server.url,
        ["-r", "durable_jobs", "-c", "2", "--processes", "2", "-t", "1", "--max-memory", "250"],
        env=env, log_dir=tmp_path,
    )
    client = rfetch.Client(rfetch.Config(redis_url=redis_server.url))
    jid = durable_jobs.ChaosWalk.set(client=client).perform_async(ITEMS)
    assert jid is not None
    harness = Harness(r, swarm, jid)
    started = time.monotonic()
    try:
        wait_for(lambda: r.llen("chaos:resumes") >= 1, 60, swarm.log)
        for turn in range(ROUNDS * len(KINDS) * 2):
            if harness.complete() or len(harness.done) >= ROUNDS * len(KINDS):
                break
            harness.interrupt(KINDS[turn % len(KINDS)])
        wait_for(harness.complete, 600, swarm.log)
        seconds = time.monotonic() - started
    finally:
        swarm.signal(signal.SIGTERM)
        swarm.wait(60)
    _check(r, harness, seconds, say)


def _check(r: redis.Redis, harness: Harness, seconds: float, say: Callable[[str], None]) -> None:
    done, cursors = harness.done, harness.cursors
    counts = {int(k): int(v) for k, v in r.hgetall("chaos:count").items()}
    resumes = [line.decode().split() for line in r.lrange("chaos:resumes", 0, -1)]
    resumed_at = [int(c) for c, _, _ in resumes[1:] if c != "None"]
    redone = [(cause.replace("_", " "), int(last) - int(c)) for c, last, cause in resumes[1:]
              if c != "None" and last != "None"]
    rate = ITEMS / seconds
    say(f"{len(done)} interruptions ({', '.join(f'{k}: {done.count(k)}' for k in KINDS)}), "
        f"{len(resumes)} executions, {seconds:.0f} s, about {rate:.0f} items/s overall")
    numbers = [n for _, n in redone]
    say(f"items re-processed per resumption: max {max(numbers, default=0)}, mean "
        f"{statistics.mean(numbers) if numbers else 0:.1f}; items run more than once in all: "
        f"{sum(counts.values()) - ITEMS} (checkpoint interval 1 s)")
    for kind in KINDS:
        say(f"  after {kind}: {[n for k, n in redone if k == kind]}")
    # A recycle interrupts at an item boundary after a checkpoint: nothing is redone.
    recycles = [n for k, n in redone if k in ("USR2", "--max-memory")]
    assert recycles == [0] * len(recycles)
    assert len(done) >= 20
    assert set(counts) == set(range(ITEMS)), "an item was never processed"
    assert resumed_at == sorted(resumed_at), "an execution resumed behind an earlier one"
    assert cursors == sorted(cursors), "the saved cursor moved backwards"
    # One checkpoint interval of work plus the item in flight, with a margin of 3x the
    # mean rate for the loaded machine (the figures above are the measurement).
    assert max(numbers, default=0) <= 3 * rate * 1.0 + 1
