"""Fetch caps with real ``rfetch worker`` processes, counted from the jobs' own evidence
(``tests/jobs/chaos_jobs.py``: ``start``/``done`` lines with one clock, written outside Redis):

- ``concurrency_limit=3`` (and 2 for a second key) over three worker processes x 4 threads:
  at no moment do more runs of a key overlap than its limit, and the limit is reached.
- A SIGKILLed holder's slot comes back with orphan recovery and not before: while a live
  worker with free threads waits, the key's waiting jobs do not start; the killed jobs run
  again after their recovery, and only then do the others start.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.redis_server import RedisServer
from tests.support.workers import FAST_ENV, WorkerProcess

pytestmark = pytest.mark.slow

Runs = dict[str, list[tuple[float, float | None]]]


def read_runs(directory: Path) -> Runs:
    """jid -> its runs as (start, done or None), in start order per process."""
    events: list[tuple[float, str, str, str]] = []
    for path in directory.glob("*.log"):
        for line in path.read_text().splitlines():
            event, jid, pid, at = line.split(" ")[:4]
            events.append((float(at), event, jid, pid))
    runs: Runs = {}
    open_runs: dict[tuple[str, str], int] = {}
    for at, event, jid, pid in sorted(events):
        if event == "start":
            runs.setdefault(jid, []).append((at, None))
            open_runs[(jid, pid)] = len(runs[jid]) - 1
        elif event == "done" and (jid, pid) in open_runs:
            i = open_runs.pop((jid, pid))
            runs[jid][i] = (runs[jid][i][0], at)
    return runs


def most_at_once(runs: Runs, jids: list[str], end: float) -> int:
    """The most runs of ``jids`` overlapping at one moment (an unfinished run lasts until
    ``end``)."""
    edges = []
    for jid in jids:
        for start, done in runs.get(jid, []):
            edges += [(start, 1), (done if done is not None else end, -1)]
    most = now = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        now += step
        most = max(most, now)
    return most


def worker(url: str, evidence: Path) -> WorkerProcess:
    return WorkerProcess(
        url, ["-r", "chaos_jobs", "-c", "4"],
        env={**FAST_ENV, "RFETCH_CHAOS_DIR": str(evidence)}, log_dir=evidence.parent,
    )


def wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_no_more_than_the_limit_run_at_once_across_processes(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    client = Client(Config(redis_url=own_redis.url))
    jids: dict[str, list[str]] = {"t42": [], "t7": []}
    for i in range(24):
        for key, limit in (("t42", 3), ("t7", 2)):
            jid = client.push("chaos_jobs.Work", [150, key, i],
                              {"concurrency_key": key, "concurrency_limit": limit})
            assert jid is not None
            jids[key].append(jid)
    procs = [worker(own_redis.url, evidence) for _ in range(3)]
    try:
        wait(lambda: sum(1 for r in read_runs(evidence).values() if r and r[-1][1]) >= 48,
             180, "48 jobs done")
    finally:
        for proc in procs:
            proc.signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
    runs = read_runs(evidence)
    end = time.time()
    assert most_at_once(runs, jids["t42"], end) == 3  # never more, and the cap is used
    assert most_at_once(runs, jids["t7"], end) == 2
    assert all(len(runs[j]) == 1 for j in jids["t42"] + jids["t7"])  # each ran once


def test_a_killed_holders_slot_comes_back_with_orphan_recovery_not_before(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    client = Client(Config(redis_url=own_redis.url))
    opts = {"concurrency_key": "k", "concurrency_limit": 2}
    held = [client.push("chaos_jobs.Work", [3000, "held", i], opts) for i in range(2)]
    rest = [client.push("chaos_jobs.Work", [50, "rest", i], opts) for i in range(3)]
    assert all(held) and all(rest)
    server = redis.Redis.from_url(own_redis.url)
    first = worker(own_redis.url, evidence)
    second = None
    try:
        wait(lambda: all(read_runs(evidence).get(j) for j in held), 60, "both holders started")
        second = worker(own_redis.url, evidence)  # free threads, but the key is full
        second.identity(server)
        first.signal(signal.SIGKILL)
        first.wait(30)
        killed_at = time.time()
        wait(lambda: all(server.exists(f"rfetch:recoveries:{j}") for j in held), 60,
             "orphan recovery of the holders")
        recovered_seen = time.time()
        wait(lambda: all(read_runs(evidence).get(j) and read_runs(evidence)[j][-1][1]
                         for j in rest), 60, "the waiting jobs done")
    finally:
        for proc in (first, second):
            if proc is not None and proc.proc.poll() is None:
                proc.signal(signal.SIGTERM)
                proc.wait(60)
    runs = read_runs(evidence)
    reruns = [runs[j][1] for j in held]  # each holder ran again, after its recovery
    assert all(len(runs[j]) == 2 for j in held)
    assert min(start for start, _ in reruns) > killed_at
    rest_starts = [runs[j][0][0] for j in rest]
    # Not before: nothing of the key started between the kill and the recovery, though the
    # second worker idled with 4 free threads; the waiting jobs started only once a
    # recovered holder had run again and finished.
    first_rerun_done = min(done for _, done in reruns if done is not None)
    assert min(rest_starts) >= first_rerun_done
    assert min(rest_starts) > killed_at and recovered_seen > killed_at
    # A killed run holds its slot until its job runs again (after recovery): so counted,
    # the key never had more than 2 at once.
    for jid in held:
        runs[jid][0] = (runs[jid][0][0], runs[jid][1][0])
    assert most_at_once(runs, held + rest, time.time()) == 2


def test_expired_jobs_never_run_and_caps_compose_with_tenants_and_pausing(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    """One real worker on a paused queue holding plain, tenant, capped and expiring jobs:
    nothing runs while paused; once unpaused every job runs once except the expired ones,
    which never run and are counted, and the capped key never has more than 2 at once."""
    from rfetch.api import Api

    evidence = tmp_path / "evidence"
    evidence.mkdir()
    config = Config(redis_url=own_redis.url)
    client = Client(config)
    api = Api(config)
    api.queue("default").pause()
    capped = [client.push("chaos_jobs.Work", [100, "c", i],
                          {"concurrency_key": "k", "concurrency_limit": 2}) for i in range(8)]
    tenants = [client.push("chaos_jobs.Work", [10, "t", i], {"tenant": f"t{i % 3}"})
               for i in range(6)]
    plain = [client.push("chaos_jobs.Work", [10, "p", i]) for i in range(4)]
    expired = [client.push("chaos_jobs.Work", [10, "x", i], {"expires_in": 1})
               for i in range(5)]
    proc = worker(own_redis.url, evidence)
    try:
        proc.identity(redis.Redis.from_url(own_redis.url))
        time.sleep(2.0)  # past the expiry, and time for a wrong fetch from a paused queue
        assert read_runs(evidence) == {}
        api.queue("default").unpause()
        ran = capped + tenants + plain
        wait(lambda: all(read_runs(evidence).get(j) and read_runs(evidence)[j][-1][1]
                         for j in ran), 60, "every job that had not expired")
        wait(lambda: api.expired_count() == 5, 30, "the expired jobs counted")
    finally:
        proc.signal(signal.SIGTERM)
        proc.wait(60)
    runs = read_runs(evidence)
    assert not any(j in runs for j in expired)  # never ran
    assert all(len(runs[j]) == 1 for j in ran)
    assert most_at_once(runs, [j for j in capped if j], time.time()) == 2
    assert api.expired_by_queue() == {"default": 5}
    assert api.concurrency_keys() == []  # every slot given back, nothing waiting
