"""What peer-bench's job bodies cost with no framework at all.

    python -m benchmarks.floors [--python PY] [--runs 3] [--async-jobs 10000] [--latency-jobs 200]

``benchmarks.ceiling`` is this for the no-op drain. Here, in the interpreter ``--python``
(default: this one; give peer-bench's ``/tmp/rfetch-venv/bin/python`` for the redis-py that
``pip install rfetch`` brings), against a fresh private redis-server:

* **async**: peer-bench's async job body (``await asyncio.sleep(0.1)`` then ``INCR`` through a
  ``redis.asyncio`` client), N times, at most 1,000 at once, on one event loop: no fetch, no
  acknowledgement. Prints jobs/s and the process's CPU microseconds per job. No asyncio
  framework running that body in one process drains faster than this (it also needs the CPU
  for its own work); CPU per job x jobs/s near 1e6 means the loop's one CPU is the limit.
* **incr**: one ``INCR`` through redis-py (the no-op job's body), 20,000 in a loop on one
  thread, best of 5: its CPU microseconds per call, what every Python framework's no-op job
  pays before the framework's own work (``benchmarks.ceiling`` has the threaded rate).
* **latency**: peer-bench's idle-latency probe with a bare queue: a client process stamps
  ``time.time()``, ``LPUSH``es it (redis-py, one round trip), and waits for the answer; a second
  process blocks on ``BLMOVE`` (redis-py) and answers with ``time.time()`` when it gets the
  stamp. Idle gaps of 0.1-0.6 s, as peer-bench. Prints p50 / p90 / p99 in milliseconds: what
  a Python client and a Python worker cost with redis-py alone, before any framework.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

import click

from benchmarks.common import PrivateRedis

ASYNC = """
import asyncio, sys, time
import redis.asyncio
url, jobs = sys.argv[1], int(sys.argv[2])
marks = {int(jobs * 0.05): None, int(jobs * 0.95): None}
done = 0
async def main():
    client = redis.asyncio.Redis.from_url(url, max_connections=10_000)
    await client.ping()
    room = asyncio.Semaphore(1000)
    async def job():
        global done
        try:
            await asyncio.sleep(0.1)
            await client.incr("bench:done")
            done += 1
            if done in marks:
                marks[done] = (time.perf_counter(), time.process_time())
        finally:
            room.release()
    tasks = set()
    for _ in range(jobs):
        await room.acquire()
        task = asyncio.create_task(job())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await asyncio.gather(*tasks)
    (n0, (t0, c0)), (n1, (t1, c1)) = sorted(marks.items())
    print((n1 - n0) / (t1 - t0), (c1 - c0) / (n1 - n0) * 1e6)
    await client.aclose()
asyncio.run(main())
"""

INCR = """
import sys, time, redis
client = redis.Redis.from_url(sys.argv[1])
client.incr("bench:done")
best = float("inf")
for _ in range(5):
    cpu = time.thread_time()
    for _ in range(20_000):
        client.incr("bench:done")
    best = min(best, (time.thread_time() - cpu) / 20_000)
print(best * 1e6)
"""

WORKER = """
import sys, time, redis
client = redis.Redis.from_url(sys.argv[1])
while True:
    stamp = client.blmove("floor:queue", "floor:private", 2, "RIGHT", "LEFT")
    if stamp == b"stop":
        break
    if stamp is not None:
        client.rpush("floor:answer", stamp + b" " + repr(time.time()).encode())
"""

CLIENT = """
import random, sys, time, redis
client, rng = redis.Redis.from_url(sys.argv[1]), random.Random(42)
warm, jobs = 5, int(sys.argv[2])
for i in range(warm + jobs):
    time.sleep(rng.uniform(0.1, 0.6) if i >= warm else 0.05)
    client.lpush("floor:queue", repr(time.time()))
    if client.blmove("floor:answer", "floor:done", 30, "LEFT", "RIGHT") is None:
        sys.exit("no answer in 30 s")
client.lpush("floor:queue", "stop")
for row in client.lrange("floor:done", warm, -1):
    pushed, answered = row.split()
    print((float(answered) - float(pushed)) * 1000)
"""


def _async_run(python: str, jobs: int) -> tuple[float, float]:
    with PrivateRedis() as server:
        out = subprocess.run([python, "-c", ASYNC, server.url, str(jobs)], check=True,
                             capture_output=True, text=True, timeout=600)
    rate, cpu = out.stdout.split()
    return float(rate), float(cpu)


def _latency_run(python: str, jobs: int) -> list[float]:
    with PrivateRedis() as server:
        worker = subprocess.Popen([python, "-c", WORKER, server.url])
        try:
            out = subprocess.run([python, "-c", CLIENT, server.url, str(jobs)], check=True,
                                 capture_output=True, text=True, timeout=900)
        finally:
            try:
                worker.wait(10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
    return sorted(float(line) for line in out.stdout.split())


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q / 100))]


@click.command()
@click.option("--python", default=sys.executable, show_default=True,
              help="Interpreter (with redis-py) to run the bare programs in.")
@click.option("--runs", default=3, show_default=True, help="Async runs; the median is printed.")
@click.option("--async-jobs", default=10_000, show_default=True, help="Async jobs per run.")
@click.option("--latency-jobs", default=200, show_default=True,
              help="Latency probes (one run; 0 skips it).")
def main(python: str, runs: int, async_jobs: int, latency_jobs: int) -> None:
    """Print the INCR, async and idle-latency floors: peer-bench's job bodies with no
    framework."""
    version = subprocess.run([python, "-c", "import redis; print(redis.__version__)"],
                             check=True, capture_output=True, text=True).stdout.strip()
    with PrivateRedis() as server:
        incr = subprocess.run([python, "-c", INCR, server.url], check=True,
                              capture_output=True, text=True, timeout=600).stdout.strip()
    click.echo(f"INCR (redis-py {version}): {float(incr):.1f} us CPU per call (best of 5 x 20,000)")
    results = []
    for run in range(1, runs + 1):
        rate, cpu = _async_run(python, async_jobs)
        results.append((rate, cpu))
        click.echo(f"async run {run}: {rate:,.0f} jobs/s, {cpu:.1f} us CPU per job")
    if results:
        click.echo(f"async floor (median of {runs}, redis-py {version}): "
                   f"{statistics.median(r for r, _ in results):,.0f} jobs/s, "
                   f"{statistics.median(c for _, c in results):.1f} us CPU per job "
                   f"({async_jobs:,} x sleep 0.1 s + INCR, 1,000 at once)")
    if latency_jobs:
        lat = _latency_run(python, latency_jobs)
        click.echo(f"idle latency floor (redis-py {version}, {len(lat)} probes, gaps "
                   f"0.1-0.6 s): p50 {_pct(lat, 50):.2f} / p90 {_pct(lat, 90):.2f} / "
                   f"p99 {_pct(lat, 99):.2f} ms")


if __name__ == "__main__":
    sys.exit(main())
