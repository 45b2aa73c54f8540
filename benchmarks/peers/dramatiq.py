"""Dramatiq 2.x on Redis: ``dramatiq benchmarks.peers.dramatiq_jobs -p 1 -t C`` (a
supervisor process plus one worker process: RSS is summed over both). Its Redis broker
fetches with a Lua script and keeps an in-flight set (acked by Lua). Dramatiq has no bulk
API (``group`` enqueues one by one), so bulk enqueue is ``send`` in a loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.peers.base import BenchClient, Peer, Runtime, client_main


class DramatiqPeer(Peer):
    key = "dramatiq"
    label = "Dramatiq (1 process x threads)"
    fetch = "Lua + in-flight set"
    package = "dramatiq"
    module = "benchmarks.peers.dramatiq"
    # Its per-message lines are DEBUG, below the CLI's default INFO: quiet changes nothing.
    per_job_lines = ""

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [rt.script("dramatiq"), "benchmarks.peers.dramatiq_jobs", "-p", "1",
                "-t", str(concurrency), "-Q", *queues]


PEERS = [DramatiqPeer()]


class DramatiqClient(BenchClient):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        from benchmarks.peers import dramatiq_jobs

        self.broker = dramatiq_jobs.broker
        self.actors: dict[str, Any] = {
            "noop": dramatiq_jobs.noop, "sleep": dramatiq_jobs.sleepio,
            "stamp": dramatiq_jobs.stamp,
        }

    def push(self, kind: str, i: int, queue: str) -> None:
        actor = self.actors[kind]
        if queue == actor.queue_name:
            actor.send(i)
        else:
            self.broker.enqueue(actor.message(i).copy(queue_name=queue))

    def bulk(self, kind: str, n: int, queue: str) -> None:
        for i in range(n):
            self.push(kind, i, queue)


if __name__ == "__main__":
    client_main(DramatiqClient)
