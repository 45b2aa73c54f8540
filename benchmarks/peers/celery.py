"""Celery 5.x with the Redis broker: ``celery worker --pool threads -c C`` (one process),
BRPOP fetch with kombu's unacked hash (restored after a visibility timeout), started
``--without-gossip --without-mingle --without-heartbeat`` (the usual advice for Redis
brokers, and Celery's best case). No bulk API: bulk enqueue is an ``apply_async`` loop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.peers.base import BenchClient, Peer, Runtime, client_main


class CeleryPeer(Peer):
    key = "celery"
    label = "Celery (threads pool)"
    fetch = "BRPOP + unacked hash"
    package = "celery"
    module = "benchmarks.peers.celery"
    # "received" / "succeeded" are INFO lines, below the worker's default -l WARNING (given
    # explicitly below): no per-job lines in either setting.
    per_job_lines = ""

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [rt.script("celery"), "-A", "benchmarks.peers.celery_jobs", "worker",
                "--pool", "threads", "-c", str(concurrency), "-Q", ",".join(queues),
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                "-l", "WARNING"]


PEERS = [CeleryPeer()]


class CeleryClient(BenchClient):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        from benchmarks.peers import celery_jobs

        self.tasks: dict[str, Any] = {
            "noop": celery_jobs.noop, "sleep": celery_jobs.sleepio, "stamp": celery_jobs.stamp,
        }

    def push(self, kind: str, i: int, queue: str) -> None:
        self.tasks[kind].apply_async((i,), queue=queue)

    def bulk(self, kind: str, n: int, queue: str) -> None:
        task = self.tasks[kind]
        for i in range(n):
            task.apply_async((i,), queue=queue)


if __name__ == "__main__":
    client_main(CeleryClient)
