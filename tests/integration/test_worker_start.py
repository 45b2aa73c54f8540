"""What ``rfetch worker`` says at start about what it will run, with real worker processes:
its job classes, the Redis URL with the password hidden and the namespace; a warning for a
``-r`` that defines no job and for a worker with no job at all; and ``-r`` given a package
folder or a file inside a package registers the names the application pushes. The admin
commands' errors hide the password too.

Workers run from ``tests/jobs`` (``billingpkg/``, ``nojobs.py``, ``logjobs.py``).
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker, WorkerDefaults

PASSWORD = "s3cret-Pa55"


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    """No ``-r``: each test names what the worker requires."""
    return WorkerDefaults(
        args=("-c", "2", "--cpu-affinity", "none"),
        env={"RFETCH_HEARTBEAT_INTERVAL": "0.5", "RFETCH_BLOCK_TIMEOUT": "0.5"},
    )


def test_start_lines_name_the_jobs_redis_without_password_and_namespace(
    start_worker: StartWorker, redis_server: RedisServer, r: redis.Redis
) -> None:
    r.acl_setuser(
        "tester", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], channels=["*"],
        commands=["+@all"],
    )
    try:
        url = redis_server.url.replace("redis://", f"redis://tester:{PASSWORD}@")
        worker = start_worker("-r", "logjobs", "--namespace", "shop", url=url, ready=False)
        wait_for(lambda: "job classes:" in worker.log(), 15, worker.log)
        wait_for(lambda: r.smembers("shop:processes"), 15, worker.log)
        log = worker.log()
    finally:
        r.acl_deluser("tester")
    assert PASSWORD not in log
    assert "redis=redis://tester:***@127.0.0.1:" in log
    assert "namespace=shop" in log
    assert "job classes: logjobs.Chatty, logjobs.Explodes" in log


def test_a_require_without_jobs_and_a_worker_without_jobs_are_warned(
    start_worker: StartWorker,
) -> None:
    worker = start_worker("-r", "nojobs")
    log = worker.log()
    assert "WARNING: -r nojobs adds no job class" in log
    assert "WARNING: no job classes are registered: every job this worker fetches" in log
    assert "job classes: (none)" in log


def test_a_queue_no_job_class_uses_is_warned_about_with_a_close_name(
    start_worker: StartWorker,
) -> None:
    # Warned, not refused: a queue fed by a Ruby client is legitimate, and the worker runs.
    worker = start_worker("-r", "logjobs", "-q", "defualt", "-q", "ruby", "-q", "default")
    log = worker.log()
    assert "WARNING: -q defualt: no registered job class uses this queue (theirs: default); " \
        "did you mean -q default?" in log
    assert "WARNING: -q ruby: no registered job class uses this queue (theirs: default); " \
        "fine if another client" in log
    assert "-q default:" not in log


@pytest.mark.parametrize("target", ["./billingpkg", "billingpkg/", "./billingpkg/jobs.py"])
def test_a_package_folder_or_a_file_in_it_registers_the_pushed_name(
    start_worker: StartWorker, redis_server: RedisServer, target: str
) -> None:
    """README: ``-r`` takes a package folder defining the jobs; a file inside a package is
    registered under its package's name (``billingpkg.jobs.Invoice``), the name that an
    application importing ``billingpkg.jobs`` pushes."""
    worker = start_worker("-r", target)
    client = Client(Config(redis_url=redis_server.url))
    jid = client.push("billingpkg.jobs.Invoice", [7])
    wait_for(lambda: f"jid={jid}" in worker.log() and "INFO: done" in worker.log(), 15, worker.log)
    log = worker.log()
    assert "job classes: billingpkg.jobs.Invoice" in log
    assert "adds no job class" not in log
    assert f"jid={jid} INFO: invoiced 7" in log


@pytest.mark.parametrize(
    ("command", "code"),
    [(["queues"], 1), (["retries", "list"], 1), (["check"], 3),
     (["enqueue", "X", "[]", "--external"], 1)],
)
def test_cli_errors_hide_the_redis_password(command: list[str], code: int) -> None:
    url = f"redis://ops:{PASSWORD}@127.0.0.1:1/0"  # nothing listens on port 1
    done = subprocess.run(
        [sys.executable, "-m", "rfetch.cli", *command, "--redis-url", url],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == code
    assert "redis://ops:***@127.0.0.1:1/0" in done.stderr + done.stdout
    assert PASSWORD not in done.stderr + done.stdout


def test_an_invalid_redis_url_is_a_clear_error_without_the_password() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rfetch.cli", "worker", "--redis-url",
         f"http://ops:{PASSWORD}@127.0.0.1/0"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "redis_url must start with redis://, rediss:// or unix://, got http://ops:***@" in (
        done.stderr
    )
    assert PASSWORD not in done.stderr
