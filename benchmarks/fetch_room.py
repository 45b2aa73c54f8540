"""What a worker holds while it drains sync jobs, with and without one async job class
loaded: the longest private list sampled and the jobs given back to the queue for want of
a thread, over about 10 s. Starts its own redis-server.

    python -m benchmarks.fetch_room                    # 2,000 jobs of 0.2 s, then 200,000 no-op
    python -m benchmarks.fetch_room --jobs 500 --job-seconds 0.2 --seconds 5

Each workload runs a sync-only ``rfetch worker -c 3 -r testjobs`` and the same worker with
``-r async_jobs`` too (one module of async classes). The worker processes import rfetch from
this checkout (its folder goes first on their PYTHONPATH), so a copy of an older commit
measures that commit's code, in the same sitting.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.common import REPO
from tests.support.hoard import sample_drain
from tests.support.redis_server import RedisServer
from tests.support.workers import JOBS_DIR

WORKERS = {
    "sync-only": ["-c", "3", "-r", "testjobs"],
    "one async class loaded": ["-c", "3", "-r", "testjobs", "-r", "async_jobs"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=None, help="jobs pushed per drain")
    parser.add_argument("--job-seconds", type=float, default=None, help="each job's sleep")
    parser.add_argument("--seconds", type=float, default=10.0, help="sampling time")
    options = parser.parse_args()
    workloads = (
        [(2000, 0.2), (200_000, 0.0)]
        if options.jobs is None
        else [(options.jobs, options.job_seconds or 0.0)]
    )
    env = {"PYTHONPATH": f"{REPO}:{JOBS_DIR}"}
    server = RedisServer()
    server.start()
    try:
        client = server.client()
        logs = Path(tempfile.mkdtemp(prefix="rfetch-fetch-room-"))
        for jobs, job_seconds in workloads:
            print(f"{jobs} jobs of {job_seconds:g} s, sampled {options.seconds:g} s:")
            for name, args in WORKERS.items():
                hoard = sample_drain(
                    server.url, client, args, logs, jobs, options.seconds, job_seconds, env
                )
                print(f"  {name:24s} longest private list {hoard.max_held:4d}, given back "
                      f"{hoard.given_back:6d}, jobs run {hoard.ran}, samples {hoard.samples}")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
