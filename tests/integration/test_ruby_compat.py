"""Compatibility with Ruby Sidekiq on the same Redis (the wire format).

Tests marked ``ruby`` run Debian's ``ruby-sidekiq`` (6.4.1) with ``ruby -e`` scripts that print
JSON; they skip where Ruby or the gem is missing. Sidekiq 6.4 finds the server through
``REDIS_URL``. The Sidekiq 8 payload test needs no Ruby and always runs.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import pytest
import redis

from rfetch.config import Config
from rfetch.jobs.payload import epoch_seconds, new_jid
from rfetch.push.client import Client
from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.ruby import needs_ruby, ruby
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import WorkerProcess

FAST_ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.3",
    "RFETCH_POLL_INTERVAL_AVERAGE": "0.2",
    "RFETCH_POLL_INITIAL_WAIT": "0",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
}


def records(record: Record, event: str) -> list[list[str]]:
    """The lines of ``event``, split in 5 (the last field keeps its spaces)."""
    if not record.path.exists():
        return []
    lines = [line.split(" ", 4) for line in record.path.read_text().splitlines()]
    return [line for line in lines if line[0] == event]


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    return WorkerDefaults(args=("-r", "testjobs", "-c", "2", "-t", "1"), env=FAST_ENV)


@pytest.fixture
def worker(start_worker: StartWorker) -> Iterator[WorkerProcess]:
    """A real worker on ``default`` with the test jobs (``testjobs.Hard`` is ``HardJob``)."""
    proc = start_worker()
    yield proc
    proc.signal(signal.SIGTERM)
    assert proc.wait(15) == 0, proc.log()


@pytest.mark.ruby
@needs_ruby
def test_job_pushed_by_ruby_runs_on_rfetch(
    worker: WorkerProcess, redis_server: RedisServer, r: redis.Redis, record: Record
) -> None:
    pushed = ruby(
        redis_server.url,
        'jid = Sidekiq::Client.push("class" => "HardJob", "args" => [1, "x"])\n'
        "puts JSON.generate({jid: jid})",
    )
    jid = pushed["jid"]

    wait_for(lambda: len(records(record, "done")) == 1, 10, "the Ruby job to run")
    [(_, done_jid, pid, _, extra)] = records(record, "done")
    assert done_jid == jid
    assert pid == str(worker.pid)
    assert extra.strip() == "(1, 'x')"
    assert r.llen("queue:default") == 0
    # the acknowledgement is deferred: it lands with the next fetch, soon after
    wait_for(lambda: not list(r.scan_iter("queue:sq|*")), 10, "the private list to empty")
    assert r.zcard("retry") == 0
    assert r.zcard("dead") == 0


RUBY_READS = """
q = Sidekiq::Queue.new("default")
first = q.first
stats = Sidekiq::Stats.new
procs = Sidekiq::ProcessSet.new
process = procs.first
retries = Sidekiq::RetrySet.new
dead = Sidekiq::DeadSet.new
scheduled = Sidekiq::ScheduledSet.new
puts JSON.generate({
  queue_size: q.size, queue_latency: q.latency,
  first_jid: first.jid, first_klass: first.klass, first_args: first.args,
  first_enqueued_at: first.enqueued_at.to_f, first_created_at: first.created_at.to_f,
  processed: stats.processed, failed: stats.failed, enqueued: stats.enqueued,
  retry_size: stats.retry_size, dead_size: stats.dead_size,
  scheduled_size: stats.scheduled_size, processes_size: stats.processes_size,
  queues: stats.queues,
  process_count: procs.size, identity: process["identity"], busy: process["busy"],
  quiet: process["quiet"], stopping: process.stopping?,
  concurrency: process["concurrency"], process_queues: process["queues"],
  pid: process["pid"], beat: process["beat"],
  retry_count: retries.size, retry_jid: retries.first.jid,
  retry_error_class: retries.first["error_class"],
  retry_error_message: retries.first["error_message"],
  retry_retry_count: retries.first["retry_count"], retry_at: retries.first.at.to_f,
  retry_klass: retries.first.klass,
  dead_count: dead.size, dead_jid: dead.first.jid,
  scheduled_count: scheduled.size, scheduled_jid: scheduled.first.jid,
  scheduled_at: scheduled.first.at.to_f, scheduled_args: scheduled.first.args,
})
"""


@pytest.mark.ruby
@needs_ruby
def test_ruby_api_reads_what_rfetch_wrote(
    redis_server: RedisServer, r: redis.Redis, record: Record, start_worker: StartWorker
) -> None:
    proc = start_worker("-q", "work", ready=False)
    try:
        identity = proc.identity(r)
        client = Client(Config(redis_url=redis_server.url), r)
        retried = client.push("testjobs.AlwaysFails", ["r"], {"queue": "work", "retry": 2})
        died = client.push("testjobs.AlwaysFails", ["d"], {"queue": "work", "retry": 0})
        ok = client.push("testjobs.Noop", [], {"queue": "work"})
        wait_for(
            lambda: r.zcard("retry") == 1 and r.zcard("dead") == 1, 10, "the failures to settle"
        )
        wait_for(lambda: [x[1] for x in records(record, "done")] == [ok], 10, "the Noop job")
        sleeper = client.push("testjobs.Sleep", [30], {"queue": "work"})
        wait_for(lambda: [x[1] for x in records(record, "start")] == [sleeper], 10, "Sleep")
        wait_for(
            lambda: r.get("stat:processed") == b"3"
            and r.get("stat:failed") == b"2"
            and r.hget(identity, "busy") == b"1",
            10,
            "the heartbeat to flush stats and show the busy thread",
        )
        before = time.time()
        immediate = client.push("HardJob", [1, "x"])
        at = time.time() + 3600
        scheduled = client.push("HardJob", [2, "later"], at=at)
        retry_score = r.zrange("retry", 0, -1, withscores=True)[0][1]

        seen = ruby(redis_server.url, RUBY_READS)
        after = time.time()

        assert seen["queue_size"] == 1
        assert seen["first_jid"] == immediate
        assert seen["first_klass"] == "HardJob"
        assert seen["first_args"] == [1, "x"]
        assert before <= seen["first_enqueued_at"] <= after
        assert before <= seen["first_created_at"] <= after
        assert 0 <= seen["queue_latency"] < after - before + 1
        assert seen["processed"] == 3
        assert seen["failed"] == 2
        assert seen["enqueued"] == 1  # default: 1, work: 0 (Sleep is in the private list)
        assert seen["queues"] == {"default": 1, "work": 0}
        assert seen["retry_size"] == 1
        assert seen["dead_size"] == 1
        assert seen["scheduled_size"] == 1
        assert seen["processes_size"] == 1
        assert seen["process_count"] == 1
        assert seen["identity"] == identity
        assert seen["busy"] == 1
        assert seen["quiet"] == "false"
        assert seen["stopping"] is False
        assert seen["concurrency"] == 2
        assert seen["process_queues"] == ["work"]
        assert seen["pid"] == proc.pid
        assert before - 5 <= seen["beat"] <= after
        assert seen["retry_count"] == 1
        assert seen["retry_jid"] == retried
        assert seen["retry_error_class"] == "RuntimeError"
        assert seen["retry_error_message"] == "always fails"
        assert seen["retry_retry_count"] == 0
        assert seen["retry_at"] == pytest.approx(retry_score, abs=1e-3)
        assert seen["retry_klass"] == "testjobs.AlwaysFails"
        assert seen["dead_count"] == 1
        assert seen["dead_jid"] == died
        assert seen["scheduled_count"] == 1
        assert seen["scheduled_jid"] == scheduled
        assert seen["scheduled_at"] == pytest.approx(at, abs=1e-3)
        assert seen["scheduled_args"] == [2, "later"]

        # Quiet (TSTP) shows in Ruby's ProcessSet as Sidekiq's own quiet does.
        proc.signal(signal.SIGTSTP)
        wait_for(lambda: r.hget(identity, "quiet") == b"true", 10, "the quiet heartbeat")
        quiet = ruby(
            redis_server.url,
            "p = Sidekiq::ProcessSet.new.first\n"
            'puts JSON.generate({quiet: p["quiet"], stopping: p.stopping?, busy: p["busy"]})',
        )
        assert quiet == {"quiet": "true", "stopping": True, "busy": 1}
    finally:
        proc.signal(signal.SIGTERM)
        code = proc.wait(15)
    assert code == 0, proc.log()
    # After a clean exit Ruby no longer sees the process, and the Sleep job is back in work.
    gone = ruby(
        redis_server.url,
        'puts JSON.generate({size: Sidekiq::ProcessSet.new.size, '
        'work: Sidekiq::Queue.new("work").map(&:jid)})',
    )
    assert gone == {"size": 0, "work": [sleeper]}


RUBY_BUSY = """
busy = Sidekiq::Workers.new.map do |process, thread, work|
  {process: process, thread: thread, queue: work["queue"], jid: work["payload"]["jid"],
   klass: work["payload"]["class"], run_at: work["run_at"]}
end
puts JSON.generate({size: Sidekiq::Workers.new.size, busy: busy})
"""


@pytest.mark.ruby
@needs_ruby
def test_sidekiq_6_api_sees_the_busy_threads(
    worker: WorkerProcess, redis_server: RedisServer, r: redis.Redis, record: Record
) -> None:
    """Sidekiq 6.4's ``Workers`` (its Busy page) reads ``<identity>:workers``; Sidekiq 7 and 8
    read ``<identity>:work``: a running rfetch job shows in all of them."""
    identity = worker.identity(r)
    before = time.time()
    jid = Client(Config(redis_url=redis_server.url), r).push("testjobs.Sleep", [30])
    wait_for(lambda: [x[1] for x in records(record, "start")] == [jid], 10, "the job to start")
    wait_for(lambda: r.exists(f"{identity}:work"), 10, "the busy thread in the heartbeat")

    seen = ruby(redis_server.url, RUBY_BUSY)

    assert seen["size"] == 1
    assert len(seen["busy"]) == 1, seen
    [busy] = seen["busy"]
    assert busy["process"] == identity
    assert busy["queue"] == "default"
    assert busy["jid"] == jid
    assert busy["klass"] == "testjobs.Sleep"
    assert before - 1 <= busy["run_at"] <= time.time()
    # The Sidekiq 7/8 key holds the same entry.
    assert r.hgetall(f"{identity}:work") == r.hgetall(f"{identity}:workers")


def test_sidekiq_8_millisecond_timestamps(
    worker: WorkerProcess, r: redis.Redis, record: Record
) -> None:
    """A job pushed in Sidekiq 8's form (integer epoch milliseconds) runs, and its times read
    as epoch seconds through ``rfetch.jobs.payload.epoch_seconds``, also after a retry."""
    now_ms = int(time.time() * 1000)
    hard = {
        "retry": True,
        "queue": "default",
        "class": "HardJob",
        "args": [8, "ms"],
        "jid": new_jid(),
        "created_at": now_ms,
        "enqueued_at": now_ms,
    }
    failing = {**hard, "class": "testjobs.AlwaysFails", "args": [], "jid": new_jid(), "retry": 1}
    r.sadd("queues", "default")
    r.lpush("queue:default", json.dumps(hard), json.dumps(failing))

    wait_for(lambda: len(records(record, "done")) == 1, 10, "the Sidekiq 8 job to run")
    assert records(record, "done")[0][1] == hard["jid"]
    assert records(record, "done")[0][4].strip() == "(8, 'ms')"

    wait_for(lambda: r.zcard("retry") == 1, 10, "the failing Sidekiq 8 job to be retried")
    job = json.loads(r.zrange("retry", 0, -1)[0])
    assert job["created_at"] == now_ms  # kept as written
    created = epoch_seconds(job["created_at"])
    assert created is not None
    assert abs(created - now_ms / 1000) < 1e-6
    assert abs(job["failed_at"] - created) < 10  # both read as seconds

    r.zadd("retry", {r.zrange("retry", 0, -1)[0]: 1.0}, xx=True)
    moved_after = time.time()
    wait_for(lambda: r.zcard("dead") == 1, 10, "the failing job to die after its retry")
    dead = json.loads(r.zrange("dead", 0, -1)[0])
    assert dead["created_at"] == now_ms
    enqueued = epoch_seconds(dead["enqueued_at"])
    assert enqueued is not None
    assert created <= enqueued
    assert moved_after - 1 <= enqueued <= time.time()
