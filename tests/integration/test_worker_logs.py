"""What a real ``rfetch worker`` process writes to its log: a failed job's traceback (text
and JSON, as Sidekiq's default error handler logs it), and the application's own logging
and ``print`` output inside a job, at the worker's level, carrying the job's jid and class,
in order between the job's ``start`` and ``done`` lines.

Jobs come from ``tests/jobs/logjobs.py`` (``-r logjobs``); the log is read from the
process's output file.
"""

from __future__ import annotations

import json

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults
from tests.support.workers import WorkerProcess


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    """``rfetch worker -r logjobs`` plus each test's arguments."""
    return WorkerDefaults(
        args=("-r", "logjobs", "-c", "2", "--cpu-affinity", "none"),
        env={
            "RFETCH_HEARTBEAT_INTERVAL": "0.5",
            "RFETCH_BLOCK_TIMEOUT": "0.5",
            "RFETCH_PUSH_EXIT_TIMEOUT": "0.5",
        },
    )


@pytest.fixture
def client(redis_server: RedisServer) -> Client:
    return Client(Config(redis_url=redis_server.url))


def lines_of(worker: WorkerProcess, jid: str) -> list[str]:
    return [line for line in worker.log().splitlines() if jid in line]


def test_a_failed_job_logs_its_traceback_in_text(
    start_worker: StartWorker, client: Client, r: redis.Redis
) -> None:
    worker = start_worker()
    jid = client.push("logjobs.Explodes", ["acme"], {"retry": 0})
    assert jid is not None
    wait_for(lambda: r.zcard("dead") == 1, 15, lambda: f"the job in the dead set:\n{worker.log()}")
    wait_for(lambda: "explode_deep_inside" in worker.log(), 60, worker.log)
    assert worker.stop() == 0
    text = worker.log()
    fail = next(i for i, line in enumerate(text.splitlines()) if "fail:" in line and jid in line)
    after = "\n".join(text.splitlines()[fail:])
    assert "class=logjobs.Explodes" in text.splitlines()[fail]
    assert "Traceback (most recent call last):" in after
    assert 'in explode_deep_inside\n    raise ValueError(f"cannot bill {word}")' in after
    assert "ValueError: cannot bill acme" in after
    # The stored job keeps Sidekiq's rule: a backtrace only with the backtrace option.
    stored = json.loads(r.zrange("dead", 0, 0)[0])
    assert stored["error_class"] == "ValueError" and "error_backtrace" not in stored


def test_a_failed_job_logs_its_traceback_in_json(
    start_worker: StartWorker, client: Client, r: redis.Redis
) -> None:
    worker = start_worker("--json-logs")
    jid = client.push("logjobs.Explodes", ["json"], {"retry": 0})
    wait_for(lambda: r.zcard("dead") == 1, 15, lambda: f"the job in the dead set:\n{worker.log()}")
    wait_for(lambda: "explode_deep_inside" in worker.log(), 60, worker.log)
    worker.stop()
    entries = [json.loads(line) for line in worker.log().splitlines() if line.startswith("{")]
    fail = next(e for e in entries if e.get("jid") == jid and e["msg"].startswith("fail:"))
    assert fail["job_class"] == "logjobs.Explodes" and fail["lvl"] == "WARNING"
    assert "Traceback (most recent call last):" in fail["exc"]
    assert "in explode_deep_inside" in fail["exc"]
    assert fail["exc"].rstrip().endswith("ValueError: cannot bill json")


def test_application_logging_and_print_carry_the_job_in_order(
    start_worker: StartWorker, client: Client
) -> None:
    worker = start_worker()
    jid = client.push("logjobs.Chatty", ["w1"])
    assert jid is not None
    wait_for(lambda: any("INFO: done" in line for line in lines_of(worker, jid)), 15, worker.log)
    worker.stop()
    mine = lines_of(worker, jid)
    messages = [line.split(": ", 1)[1] for line in mine]
    # print, logger.info and logger.warning all show, between start and done, in order;
    # the DEBUG line does not (the worker runs at INFO without -v).
    assert messages == ["start", "printed w1", "info w1", "warning w1", "done"], worker.log()
    for line in mine:
        assert "class=logjobs.Chatty" in line and f"jid={jid}" in line
    assert "debug w1" not in worker.log()


def test_application_debug_logging_shows_with_verbose_in_json(
    start_worker: StartWorker, client: Client
) -> None:
    worker = start_worker("-v", "--json-logs")
    jid = client.push("logjobs.Chatty", ["w2"])
    wait_for(lambda: '"msg": "done"' in "".join(lines_of(worker, jid)), 15, worker.log)
    worker.stop()
    # Libraries log at DEBUG too under -v (redis-py, when the thread opens a connection
    # while the job's context is set): this test is about the application's and rfetch's.
    entries = [e for e in (json.loads(line) for line in lines_of(worker, jid))
               if not e["logger"].startswith("redis")]
    assert [e["msg"] for e in entries] == [
        "start", "printed w2", "debug w2", "info w2", "warning w2", "done"
    ]
    assert {e["job_class"] for e in entries} == {"logjobs.Chatty"}
    assert [e["logger"] for e in entries[1:5]] == [
        "stdout", "myapp.billing", "myapp.billing", "myapp.billing"
    ]
    assert [e["lvl"] for e in entries[1:5]] == ["INFO", "DEBUG", "INFO", "WARNING"]


def test_jobs_buffered_by_a_job_are_named_in_the_log_when_the_worker_exits(
    start_worker: StartWorker, client: Client
) -> None:
    """Reliable push inside a job, to a Redis that is down: the worker's exit (after its log
    writer stopped) still writes the at-exit error about the undelivered job."""
    worker = start_worker()
    jid = client.push("logjobs.PushesElsewhere", ["redis://127.0.0.1:1/0"])
    wait_for(lambda: any("INFO: done" in line for line in lines_of(worker, jid)), 15, worker.log)
    assert worker.stop() == 0
    log = worker.log()
    assert "1 job(s) NOT delivered: Redis at redis://127.0.0.1:1/0 unreachable at exit" in log
