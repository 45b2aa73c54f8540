"""rfetch: ``rfetch worker -c C`` (reliable fetch), ``perform_bulk`` for bulk enqueue.

Two installs: ``rfetch`` is what ``pip install rfetch`` gives (no extras: hiredis and orjson
hidden from the worker and the client, ``base.NO_SPEEDUPS``), ``rfetch-sp`` what
``pip install "rfetch[speedups]"`` gives (hiredis, redis-py's C parser, and orjson). The
``rfetch-pinned`` and ``rfetch-none`` variants run the default install with
``--cpu-affinity auto`` (every thread on one CPU) and ``--cpu-affinity none`` (the kernel's
placement, as the other frameworks run), to show what the default ``adaptive`` affinity buys.
:class:`RfetchPeer` itself (the speedups install) is what the rfetch-only tools
(``rfetch_drain``, ``affinity``, ``swarm``, ...) run.
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.peers.base import BenchClient, Peer, Runtime, client_main


class RfetchPeer(Peer):
    key = "rfetch-sp"
    label = 'rfetch[speedups] (pip install "rfetch[speedups]": hiredis + orjson)'
    fetch = "reliable (Lua batch + BLMOVE)"
    package = "rfetch"
    module = "benchmarks.peers.rfetch"
    plain_install = False
    per_job_lines = "2 INFO lines (start, done)"

    def worker_argv(self, rt: Runtime, concurrency: int, queues: Sequence[str]) -> list[str]:
        argv = [rt.python, "-m", "rfetch.cli", "worker", "-r", "benchmarks.bench_jobs",
                "-c", str(concurrency)]
        for queue in queues:
            argv += ["-q", queue]
        return argv

    def logging_args(self, quiet: bool) -> list[str]:
        # rfetch has no log-level option: this job module sets the rfetch.job logger
        # (the per-job lines) to WARNING at import.
        return ["-r", "benchmarks.peers.rfetch_quiet"] if quiet else []


class RfetchDefaultPeer(RfetchPeer):
    key = "rfetch"
    label = "rfetch (pip install rfetch: no hiredis, no orjson)"
    plain_install = True


class RfetchAffinityPeer(RfetchDefaultPeer):
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


PEERS = [RfetchDefaultPeer(), RfetchPeer(), RfetchPinnedPeer(), RfetchKernelPeer()]


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
