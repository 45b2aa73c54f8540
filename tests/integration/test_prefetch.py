"""Jobs fetched ahead (prefetch), with real ``rfetch worker`` processes and real signals:
a job fetched ahead of a long job goes to an idle process at once instead of waiting
behind it (Celery's prefetch trap), and a process stalled past its heartbeat TTL (SIGSTOP)
does not start, when it resumes, the jobs it had fetched and that orphan recovery gave to
another process meanwhile.

Jobs come from ``tests/jobs/testjobs.py``; each run appends ``<event> <jid> <pid> <time>``
to the ``RFETCH_TEST_RECORD`` file, the evidence of what ran where, counted outside Redis.
"""

from __future__ import annotations

import signal
from pathlib import Path

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.store.keys import Keys
from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker
from tests.support.workers import FAST_ENV

KEYS = Keys()


def test_a_job_fetched_ahead_of_a_long_job_starts_at_once_on_an_idle_worker(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, record: Record,
    start_worker: StartWorker,
) -> None:
    busy = start_worker("-c", "1", ready=False)
    busy.identity(r)
    client = Client(Config(redis_url=redis_server.url), r)
    # Pushed together: the one-thread worker takes the long job and, its jobs having no
    # known run time yet, fetches the short one ahead in the same round trip.
    long_jid, short_jid = client.push_bulk("testjobs.Sleep", [[30], [0]])
    wait_for(lambda: record.pids("start", long_jid) == [busy.pid], 10, "the long job to start")

    idle = start_worker("-c", "1", ready=False)
    idle.identity(r)
    wait_for(lambda: record.pids("done", short_jid), 10,
             lambda: f"the short job to run while the long one runs:\n{busy.log()}")
    assert record.pids("start", short_jid) == [idle.pid], "run once, by the idle worker"
    assert record.pids("done", long_jid) == [], "the long job still runs"
    wait_for(lambda: "given back to the queue" in busy.log(), 10, "the give-back's log line")


def test_a_stalled_worker_drops_the_jobs_it_fetched_ahead_once_recovered_elsewhere(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, record: Record,
    start_worker: StartWorker,
) -> None:
    # A long prefetch horizon keeps the second job waiting behind the first in the stalled
    # worker, as a short-job history would.
    env = {**FAST_ENV, "RFETCH_PREFETCH_HORIZON": "60"}
    client = Client(Config(redis_url=redis_server.url), r)
    running_jid, waiting_jid = client.push_bulk("testjobs.Sleep", [[1], [0]])
    stalled = start_worker("-c", "1", env=env, ready=False)
    identity = stalled.identity(r)
    wait_for(lambda: record.pids("start", running_jid) == [stalled.pid], 10, "the first job")
    assert r.llen(KEYS.private(identity, "default")) == 2, "one running, one waiting"

    stalled.signal(signal.SIGSTOP)  # longer than the heartbeat TTL (2 s): looks dead
    rescuer = start_worker("-c", "2", ready=False)
    wait_for(lambda: record.pids("done", waiting_jid) == [rescuer.pid], 30,
             lambda: f"the rescuer to recover and run the waiting job:\n{rescuer.log()}")
    # The recovery logs its line after pushing the jobs back, through the log writer thread:
    # the rescuer may run the job first.
    wait_for(lambda: "reaped dead process " + identity in rescuer.log(), 10,
             lambda: f"the rescuer to log the reaping:\n{rescuer.log()}")

    stalled.signal(signal.SIGCONT)
    # The job it was running when stopped finishes there (it also ran on the rescuer:
    # the stall's duplicate bound); the one it had fetched ahead must not start.
    wait_for(lambda: stalled.pid in record.pids("done", running_jid), 15,
             lambda: f"the stalled worker to resume:\n{stalled.log()}")
    assert stalled.stop(15) == 0
    assert record.pids("start", waiting_jid) == [rescuer.pid], stalled.log()
    assert f"dropped job {waiting_jid}" in stalled.log()
