"""The idle Redis cost of the leader election and of 100 registered periodic schedules.

Starts its own redis-server and ``workers`` real ``rfetch worker`` processes, each with the
same 100 schedules (``tests/jobs/periodic_jobs.py``, ``RFETCH_TEST_PERIODIC=hundred``:
yearly, on January 1st, so none fires during the measurement), waits until one leads,
then counts every command Redis runs over ``seconds`` (INFO commandstats before and after,
this script's own INFO calls taken out) and prints the commands per second by command
(commands run inside Lua scripts included). MONITOR over the same window tells which of
the round trips belong to the leader election and the periodic schedules (EVALSHA of their
scripts, the followers' BLPOP on the wake list). It counts commands, not time, so a loaded
machine gives the same figures.

    python -m benchmarks.periodic_idle                   # 3 workers, 30 s
    python -m benchmarks.periodic_idle --workers 1 --seconds 60

Only processes this script started are signalled, by their own PID.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import signal
import tempfile
import threading
import time
from pathlib import Path

import redis

from benchmarks.common import command_counts
from rfetch.store.scripts import read_script
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

PERIODIC_SCRIPTS = ("leader_claim", "leader_resign", "periodic_sync", "periodic_push",
                    "periodic_skip")


def monitor(client: redis.Redis, seconds: float, found: collections.Counter[str]) -> None:
    """Count top-level round trips of the periodic machinery for ``seconds`` (MONITOR)."""
    shas = {
        hashlib.sha1(read_script(name).encode()).hexdigest(): name for name in PERIODIC_SCRIPTS
    }
    deadline = time.monotonic() + seconds
    with client.monitor() as feed:
        for event in feed.listen():
            if time.monotonic() > deadline:
                return
            if event.get("client_type") == "lua":
                continue
            words = str(event["command"]).split()
            if not words:
                continue
            name = words[0].upper()
            found["round trips"] += 1
            if name == "EVALSHA" and len(words) > 1 and words[1] in shas:
                found[shas[words[1]]] += 1
            elif name == "FCALL" and len(words) > 1 and words[1].endswith(PERIODIC_SCRIPTS):
                found[next(s for s in PERIODIC_SCRIPTS if words[1].endswith("_" + s))] += 1
            elif name == "BLPOP" and "rfetch:leader-wake" in event["command"]:
                found["BLPOP wake"] += 1


def measure(workers: int, seconds: float, leader_ttl: float | None) -> None:
    server = RedisServer()
    server.start()
    base = Path(tempfile.mkdtemp(prefix="rfetch-periodic-idle-"))
    env = {"RFETCH_TEST_PERIODIC": "hundred"}
    if leader_ttl is not None:
        env["RFETCH_LEADER_TTL"] = str(leader_ttl)
    procs: list[WorkerProcess] = []
    try:
        client = server.client()
        procs = [
            WorkerProcess(server.url, ["-r", "periodic_jobs", "-q", "periodic"], env=env,
                          log_dir=base)
            for _ in range(workers)
        ]
        wait_for(lambda: client.hlen("rfetch:periodic") == 100, 60, "the leader's sync")
        wait_for(lambda: client.scard("processes") == workers, 60, "every heartbeat")
        time.sleep(5)  # past start-up: first heartbeats, polls and claims
        trips: collections.Counter[str] = collections.Counter()
        watcher = threading.Thread(target=monitor, args=(server.client(), seconds, trips))
        watcher.start()
        before = command_counts(client)
        time.sleep(seconds)
        after = command_counts(client)
        watcher.join(seconds + 30)
        delta = {name: after.get(name, 0) - before.get(name, 0) for name in after}
        delta["info"] = delta.get("info", 0) - 1  # the second INFO above
        delta = {name: n for name, n in delta.items() if n > 0}
        total = sum(delta.values())
        print(f"{workers} worker(s), 100 schedules, {seconds:.0f} s idle")
        for name, n in sorted(delta.items(), key=lambda item: -item[1]):
            print(f"  {name:12} {n:6}  {n / seconds:7.3f}/s")
        print(f"  {'all':12} {total:6}  {total / seconds:7.3f}/s")
        periodic = sum(n for name, n in trips.items() if name != "round trips")
        total_trips = trips["round trips"]
        print(f"round trips (MONITOR): {total_trips} ({total_trips / seconds:.3f}/s)")
        for name, n in sorted(trips.items()):
            if name != "round trips":
                print(f"  {name:16} {n:6}  {n / seconds:7.3f}/s")
        print(f"  {'periodic, all':16} {periodic:6}  {periodic / seconds:7.3f}/s")
        leader = client.hget("rfetch:leader", "identity")
        print(f"  leader: {leader.decode() if leader else 'none'}")
    finally:
        for proc in procs:
            proc.signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except Exception:
                proc.kill()
        server.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--leader-ttl", type=float, default=None)
    options = parser.parse_args()
    measure(options.workers, options.seconds, options.leader_ttl)


if __name__ == "__main__":
    main()
