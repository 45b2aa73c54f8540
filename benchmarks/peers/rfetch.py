"""rfetch: ``rfetch worker -c C`` (reliable fetch), ``perform_bulk`` for bulk enqueue.

The ``rfetch-plain`` variant runs the same worker with hiredis (redis-py's C parser) and
orjson hidden, to show what the optional ``speedups`` extra buys. The
``rfetch-pinned`` variant runs it with ``--cpu-affinity auto`` (every thread on one CPU; the
default leaves placement to the kernel, as the other frameworks run), to show what the
one-CPU affinity buys.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.peers.base import BenchClient, Peer, Runtime, client_main

NO_SPEEDUPS = Path(__file__).resolve().parent / "nospeedups"


class RfetchPeer(Peer):
    key = "rfetch"
    label = "rfetch"
    fetch = "reliable (Lua batch + BLMOVE)"
    package = "rfetch"
    module = "benchmarks.peers.rfetch"

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        argv = [rt.python, "-m", "rfetch.cli", "worker", "-r", "benchmarks.bench_jobs",
                "-c", str(concurrency)]
        for queue in queues:
            argv += ["-q", queue]
        return argv


class RfetchPlainPeer(RfetchPeer):
    key = "rfetch-plain"
    label = "rfetch without speedups"
    default = False

    def worker_env(self, rt: Runtime, url: str, concurrency: int,
                   queues: Sequence[str]) -> dict[str, str]:
        env = super().worker_env(rt, url, concurrency, queues)
        env["PYTHONPATH"] = f"{NO_SPEEDUPS}:{env['PYTHONPATH']}"
        return env

    def client_argv(self, rt: Runtime, args: Sequence[str]) -> list[str]:
        return ["env", f"PYTHONPATH={NO_SPEEDUPS}:{rt.repo}", *super().client_argv(rt, args)]


class RfetchAffinityPeer(RfetchPeer):
    """rfetch with ``--cpu-affinity`` set to :attr:`affinity` (not run unless named)."""

    affinity = ""
    default = False

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        return [*super().worker_argv(rt, concurrency, queues), "--cpu-affinity", self.affinity]


class RfetchPinnedPeer(RfetchAffinityPeer):
    key = "rfetch-pinned"
    label = "rfetch --cpu-affinity auto"
    affinity = "auto"


class RfetchKernelPeer(RfetchAffinityPeer):
    key = "rfetch-none"
    label = "rfetch --cpu-affinity none"
    affinity = "none"


PEERS = [RfetchPeer(), RfetchPlainPeer(), RfetchPinnedPeer(), RfetchKernelPeer()]


class RfetchClient(BenchClient):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        import rfetch
        from benchmarks import async_jobs, bench_jobs

        rfetch.configure(redis_url=url)
        self.jobs: dict[str, type[rfetch.Job]] = {
            "noop": bench_jobs.Noop, "sleep": bench_jobs.SleepIO, "stamp": bench_jobs.Stamp,
            "cpu": bench_jobs.Cpu, "io": bench_jobs.SocketIO, "hash": bench_jobs.HashBuffer,
            "wait100": bench_jobs.AsyncWait, "wait100-thread": bench_jobs.ThreadWait,
            "wait100-only": async_jobs.OnlyAsyncWait,
        }

    def bulk(self, kind: str, n: int, queue: str) -> None:
        self.jobs[kind].set(queue=queue).perform_bulk([i] for i in range(n))

    def push(self, kind: str, i: int, queue: str) -> None:
        self.jobs[kind].set(queue=queue).perform_async(i)


if __name__ == "__main__":
    client_main(RfetchClient)
