"""arq (asyncio) on Redis: ``arq benchmarks.peers.arq_jobs.WorkerSettings`` with
``max_jobs`` = C and a 10 ms poll of the queue's sorted set (no blocking fetch). One
worker serves one queue, so the 20-queue idle cost does not apply. No bulk API: bulk
enqueue is a loop of ``enqueue_job``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from benchmarks.peers.base import BenchClient, Peer, Runtime, client_main


class ArqPeer(Peer):
    key = "arq"
    label = "arq (poll 10 ms)"
    fetch = "zset poll"
    package = "arq"
    module = "benchmarks.peers.arq"
    multi_queue = False
    plain_install = False  # arq requires redis[hiredis]: its plain install has hiredis
    per_job_lines = "2 INFO lines (start, done)"

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [rt.script("arq"), "benchmarks.peers.arq_jobs.WorkerSettings"]

    def logging_args(self, quiet: bool) -> list[str]:
        return ["--custom-log-dict", "benchmarks.peers.arq_jobs.QUIET_LOG"] if quiet else []


PEERS = [ArqPeer()]

FUNCTIONS = {"noop": "noop", "sleep": "sleepio", "stamp": "stamp", "wait100": "wait100"}


class ArqClient(BenchClient):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        from arq.connections import RedisSettings, create_pool

        self.loop = asyncio.new_event_loop()
        self.pool = self.loop.run_until_complete(create_pool(RedisSettings.from_dsn(url)))

    def push(self, kind: str, i: int, queue: str) -> None:
        self.loop.run_until_complete(
            self.pool.enqueue_job(FUNCTIONS[kind], i, _queue_name=queue)
        )

    def bulk(self, kind: str, n: int, queue: str) -> None:
        async def enqueue_all() -> None:
            for i in range(n):
                await self.pool.enqueue_job(FUNCTIONS[kind], i, _queue_name=queue)

        self.loop.run_until_complete(enqueue_all())

    def close(self) -> None:
        self.loop.run_until_complete(self.pool.aclose())
        self.loop.close()


if __name__ == "__main__":
    client_main(ArqClient)
