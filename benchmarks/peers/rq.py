"""RQ 2.x: ``rq worker`` runs one job at a time (no threads), with BLMOVE into an
intermediate list. Two rows: SimpleWorker (jobs in the worker process) and the default
forking Worker (a child process per job; RSS summed over the worker and its child).
Bulk enqueue is ``Queue.enqueue_many`` (one pipeline)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.peers.base import BenchClient, Peer, Runtime, client_main


class RQSimplePeer(Peer):
    key = "rq"
    label = "RQ SimpleWorker (1 job at a time)"
    fetch = "BLMOVE"
    package = "rq"
    module = "benchmarks.peers.rq"
    fixed_concurrency = 1
    worker_class = "rq.worker.SimpleWorker"
    per_job_lines = "4 INFO lines (dequeued, completed, Job OK, result kept)"

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [rt.script("rq"), "worker", "-w", self.worker_class, *queues]

    def logging_args(self, quiet: bool) -> list[str]:
        return ["--quiet"] if quiet else []  # rq worker --quiet: logging at WARNING

    def worker_env(self, rt: Runtime, url: str, concurrency: int,
                   queues: Sequence[str]) -> dict[str, str]:
        env = super().worker_env(rt, url, concurrency, queues)
        env["RQ_REDIS_URL"] = url  # rq worker --url
        return env


class RQForkPeer(RQSimplePeer):
    key = "rq-fork"
    label = "RQ Worker, forking (1 job at a time)"
    worker_class = "rq.worker.Worker"


PEERS = [RQSimplePeer(), RQForkPeer()]


class RQClient(BenchClient):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        import redis

        from benchmarks.peers import rq_jobs

        self.redis = redis.Redis.from_url(url)
        self.queues: dict[str, Any] = {}
        self.funcs: dict[str, Any] = {
            "noop": rq_jobs.noop, "sleep": rq_jobs.sleepio, "stamp": rq_jobs.stamp,
        }

    def _queue(self, name: str) -> Any:
        from rq import Queue

        if name not in self.queues:
            self.queues[name] = Queue(name, connection=self.redis)
        return self.queues[name]

    def push(self, kind: str, i: int, queue: str) -> None:
        self._queue(queue).enqueue(self.funcs[kind], i)

    def bulk(self, kind: str, n: int, queue: str) -> None:
        from rq import Queue

        func = self.funcs[kind]
        self._queue(queue).enqueue_many([Queue.prepare_data(func, (i,)) for i in range(n)])


if __name__ == "__main__":
    client_main(RQClient)
