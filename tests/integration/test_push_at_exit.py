"""Short-lived processes and an unreachable Redis: ``rfetch enqueue`` exits 1 without a jid
when the job did not reach Redis (never a jid for a job then lost), and a script whose
pushes were buffered by reliable push says at exit that it waits (``push_exit_timeout``),
delivers them if Redis comes back meanwhile, and otherwise names how many were not
delivered. Real subprocesses; the Redis is this test's own, stopped and restarted.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for

SCRIPT = textwrap.dedent(
    """
    import sys
    import rfetch

    client = rfetch.configure(push_exit_timeout=float(sys.argv[1]), network_timeout=1.0,
                              block_timeout=0.5)
    print(client.push("app.Report", [1]), flush=True)
    """
)


def run_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rfetch.cli", *args, "--redis-url", url],
        capture_output=True, text=True, timeout=60,
    )


def test_enqueue_exits_1_without_a_jid_when_redis_is_down(own_redis: RedisServer) -> None:
    url = own_redis.url
    own_redis.stop()
    done = run_cli(url, "enqueue", "app.Report", "[1]", "--external")
    assert done.returncode == 1
    assert done.stdout == ""  # no jid for a job that is not in Redis
    assert "job not enqueued: Redis at" in done.stderr
    assert "undelivered" not in done.stderr and "buffer" not in done.stderr
    own_redis.start()
    assert own_redis.client().llen("queue:default") == 0  # nothing delivered afterwards


def test_enqueue_prints_the_jid_of_a_job_in_redis(own_redis: RedisServer) -> None:
    done = run_cli(own_redis.url, "enqueue", "app.Report", "[1]", "-q", "reports", "--external")
    assert done.returncode == 0, done.stderr
    jid = done.stdout.strip()
    assert len(jid) == 24
    assert jid.encode() in own_redis.client().lindex("queue:reports", 0)


def start_script(
    tmp_path: Path, url: str, exit_timeout: float
) -> tuple[subprocess.Popen[str], Path]:
    script = tmp_path / "push_and_exit.py"
    script.write_text(SCRIPT)
    err = tmp_path / "stderr.txt"
    with open(err, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(exit_timeout)],
            env={"REDIS_URL": url, "PATH": "/usr/bin:/bin"},
            stdout=subprocess.PIPE, stderr=sink, text=True,
        )
    return proc, err


def test_a_script_waits_at_exit_and_delivers_when_redis_comes_back(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    own_redis.stop()
    proc, err = start_script(tmp_path, own_redis.url, 60)
    try:
        wait_for(lambda: "waiting up to 60 s" in err.read_text(), 30, err.read_text)
        own_redis.start()
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    text = err.read_text()
    assert "exiting with 1 job(s) buffered while Redis at redis://" in text
    assert "delivered the 1 buffered job(s) before exit" in text
    assert out.strip().encode() in own_redis.client().lindex("queue:default", 0)


def test_a_script_names_the_jobs_it_could_not_deliver(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    own_redis.stop()
    proc, err = start_script(tmp_path, own_redis.url, 0.5)
    proc.communicate(timeout=60)
    text = err.read_text()
    assert "1 job(s) NOT delivered: Redis at redis://" in text
    assert "LOST with this process" in text
