"""huey 3.x on Redis: ``huey_consumer benchmarks.peers.huey_jobs.huey -w C -k thread``,
BRPOP fetch (not reliable). One huey instance is one queue, so the 20-queue idle cost
does not apply. No bulk API: bulk enqueue is a loop of task calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.peers.base import BenchClient, Peer, Runtime, client_main


class HueyPeer(Peer):
    key = "huey"
    label = "huey (threads)"
    fetch = "BRPOP, not reliable"
    package = "huey"
    module = "benchmarks.peers.huey"
    multi_queue = False
    per_job_lines = "2 INFO lines (Executing, executed in)"

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [rt.script("huey_consumer"), "benchmarks.peers.huey_jobs.huey",
                "-w", str(concurrency), "-k", "thread"]

    def logging_args(self, quiet: bool) -> list[str]:
        return ["-q"] if quiet else []  # huey_consumer -q: logging at WARNING


PEERS = [HueyPeer()]


class HueyClient(BenchClient):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        from benchmarks.peers import huey_jobs

        self.tasks: dict[str, Any] = {
            "noop": huey_jobs.noop, "sleep": huey_jobs.sleepio, "stamp": huey_jobs.stamp,
        }

    def push(self, kind: str, i: int, queue: str) -> None:
        self.tasks[kind](i)

    def bulk(self, kind: str, n: int, queue: str) -> None:
        task = self.tasks[kind]
        for i in range(n):
            task(i)


if __name__ == "__main__":
    client_main(HueyClient)
