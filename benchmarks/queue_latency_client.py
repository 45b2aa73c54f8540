"""The pushing side of ``python -m benchmarks.queue_latency``, run by the interpreter of the
rfetch under test (its own push scripts) from this directory: after ``warm`` jobs, pushes
``n`` single ``bench_jobs.Latency`` jobs, each after a random idle gap, to the queue the
schedule names, and waits for each to start before the next gap.

    python queue_latency_client.py REDIS_URL WARM N GAP_MIN GAP_MAX SEED QUEUE...
"""

from __future__ import annotations

import random
import sys
import time

import redis

import rfetch


def main(argv: list[str]) -> None:
    url, warm, n, gmin, gmax, seed = argv[:6]
    queues = argv[6:]
    client = rfetch.Client(rfetch.Config(redis_url=url))
    done = redis.Redis.from_url(url)
    rng = random.Random(int(seed))
    for i in range(int(warm) + int(n)):
        queue = queues[i % len(queues)]
        if i >= int(warm):
            time.sleep(rng.uniform(float(gmin), float(gmax)))
        client.push("bench_jobs.Latency", [time.time()], {"queue": queue})
        row = done.blmove("bench:lat", "bench:latdone", 30, "LEFT", "RIGHT")
        if row is None:
            sys.exit(f"job {i} on queue {queue} did not start within 30 s")
        done.rpush("bench:latq", queue)



if __name__ == "__main__":
    main(sys.argv[1:])
