"""Recycling runs no job twice: the reproduction of ``--max-memory`` and USR2 recycling.

Starts its own redis-server and a swarm (``rfetch worker --processes``) on the test jobs,
and prints how many times each job started (``INCR`` from the job, in Redis) and whether it
finished. Run from the repository: ``.venv/bin/python scripts/recycle-repro.py``.

* memory: ``--processes 1 -c 1 --max-memory 150 -t 2``, one job holding 200 MB for 8 s.
* usr2: ``--processes 1 -c 2 -t 2``, two 10 s jobs, USR2 to the parent once both run.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent),
                str(Path(__file__).resolve().parent.parent / "tests" / "jobs")]

import limit_jobs  # noqa: E402

import rfetch  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402
from tests.support.swarm import Records  # noqa: E402
from tests.support.workers import WorkerProcess  # noqa: E402

ENV = {"RFETCH_HEARTBEAT_INTERVAL": "0.5", "RFETCH_BLOCK_TIMEOUT": "0.3"}


def _report(name: str, server: RedisServer, records: Records, jids: list[str],
            worker: WorkerProcess, seconds: float) -> None:
    r = server.client()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and set(records.count("done")) != set(jids):
        time.sleep(0.5)
    for jid in jids:
        starts = int(r.get(f"hog-starts:{jid}") or 0)
        print(f"{name}: job {jid} started {starts} time(s), "
              f"finished {records.count('done')[jid]} time(s)")
    recycled = [line for line in worker.log().splitlines() if "replacing worker" in line]
    print(f"{name}: {len(recycled)} recycle(s) logged; dead set: {r.zcard('dead')}")


def main() -> None:
    server = RedisServer()
    server.start()
    tmp = Path(tempfile.mkdtemp(prefix="rfetch-recycle-"))
    client = rfetch.Client(rfetch.Config(redis_url=server.url))
    try:
        records = Records(tmp / "memory")
        env = {**ENV, "RFETCH_TEST_RECORD": str(records.path)}
        worker = WorkerProcess(server.url, ["-r", "limit_jobs", "--processes", "1", "-c", "1",
                                            "--max-memory", "150", "-t", "2"], env, tmp)
        jids = [str(limit_jobs.Hog.set(client=client).perform_async(200, 8.0))]
        _report("memory", server, records, jids, worker, 50)
        worker.stop(30)
        server.client().flushall()
        records = Records(tmp / "usr2")
        env = {**ENV, "RFETCH_TEST_RECORD": str(records.path)}
        worker = WorkerProcess(server.url, ["-r", "limit_jobs", "--processes", "1", "-c", "2",
                                            "-t", "2"], env, tmp)
        jids = [str(limit_jobs.Hog.set(client=client).perform_async(1, 10.0)) for _ in "ab"]
        while len(records.count("start")) < 2:
            time.sleep(0.2)
        worker.signal(signal.SIGUSR2)
        _report("usr2", server, records, jids, worker, 50)
        worker.stop(30)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
