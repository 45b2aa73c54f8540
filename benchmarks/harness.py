"""One framework's runs for ``benchmarks.compare`` (and the tools built on its drain): a
private redis-server per run, the framework's client as a subprocess, its worker in its own
process group, stopped by that group.

:class:`Setting` holds what must be the same for every framework of one comparison: the
worker's logging, the steady window of a drain, the idle gaps of the latency probe and an
optional CPU pin.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Monitor,
    PrivateRedis,
    client_addr,
    command_counts,
    diff_counts,
    stop_group,
    watch_drain,
    without,
)
from benchmarks.peers.base import DONE, RESULT_PREFIX, Peer, Runtime


@dataclass(frozen=True)
class Setting:
    """The conditions every framework of one comparison runs under.

    Attributes:
        quiet: per-job log lines off (``Peer.logging``); False: each framework's default.
        window: the fractions of a drain between which the steady rate is taken.
        gaps: the latency probe's idle gap before each push, (min, max) seconds.
        pin: CPUs for ``taskset -c`` around every worker, or None.
    """

    quiet: bool = False
    window: tuple[float, float] = (0.1, 0.9)
    gaps: tuple[float, float] = (0.005, 0.020)
    pin: str | None = None


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages from ``/proc/loadavg``."""
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


class Bench:
    """Runs the workloads for one framework under one :class:`Setting`."""

    def __init__(self, peer: Peer, rt: Runtime, logs: Path, limit: float,
                 setting: Setting | None = None) -> None:
        self.peer = peer
        self.rt = rt
        self.logs = logs
        self.limit = limit
        self.setting = setting or Setting()
        self.tag = f"{peer.key}-quiet" if self.setting.quiet else peer.key

    def env(self, url: str, concurrency: int, queues: Sequence[str]) -> dict[str, str]:
        env = self.peer.worker_env(self.rt, url, concurrency, queues)
        if self.setting.quiet:
            env["BENCH_QUIET"] = "1"  # read by job modules that set their logging (Sidekiq)
        return env

    def client(self, server: PrivateRedis, queues: Sequence[str], args: Sequence[str],
               timeout: float) -> dict[str, Any]:
        """Run the framework's client side; its result dict.

        Raises:
            RuntimeError: the client failed or printed no result.
        """
        env = self.env(server.url, 10, queues)
        try:
            out = subprocess.run(self.peer.client_argv(self.rt, args), env=env, cwd=self.rt.repo,
                                 capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"client {' '.join(args)} took over {timeout:.0f} s") from None
        for line in out.stdout.splitlines():
            if line.startswith(RESULT_PREFIX):
                result: dict[str, Any] = json.loads(line.removeprefix(RESULT_PREFIX))
                return result
        raise RuntimeError(f"client {' '.join(args)} failed (exit {out.returncode}): "
                           f"{out.stderr.strip()[-1500:]}")

    def worker(self, server: PrivateRedis, concurrency: int, queues: Sequence[str],
               name: str) -> subprocess.Popen[bytes]:
        log = self.logs / f"{self.tag}-{name}.log"
        argv = [*self.peer.worker_argv(self.rt, concurrency, queues),
                *self.peer.logging_args(self.setting.quiet)]
        if self.setting.pin is not None:  # the whole worker process tree on those CPUs
            argv = ["taskset", "-c", self.setting.pin, *argv]
        with open(log, "ab") as out:
            return subprocess.Popen(
                argv, env=self.env(server.url, concurrency, queues), cwd=self.rt.repo,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def log_tail(self, name: str) -> str:
        path = self.logs / f"{self.tag}-{name}.log"
        try:
            lines = path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-5:])

    def drain(self, kind: str, jobs: int, concurrency: int, monitor: bool = False
              ) -> dict[str, Any]:
        """Fill ``jobs`` jobs with the bulk API, then drain them with one worker."""
        concurrency = self.peer.concurrency(concurrency)
        name = f"{kind}-c{concurrency}"
        with PrivateRedis() as server:
            fill = self.client(server, ["default"], ["fill", kind, str(jobs)], timeout=600)
            mon = Monitor(server.port, {client_addr(server.client)}) if monitor else None
            before = command_counts(server.client)
            proc = self.worker(server, concurrency, ["default"], name)
            try:
                progress = watch_drain(server, proc, jobs, self.limit)
                pipe = server.client.pipeline(transaction=True)
                pipe.info("commandstats")
                pipe.get(DONE)
                stats, done_text = pipe.execute()
            finally:
                stop_group(proc)
                if mon is not None:
                    mon.stop()
            if progress.error:
                raise RuntimeError(f"{progress.error}; log: {self.log_tail(name)}")
        after = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
        done = int(done_text or 0)
        # Harness: the INFO before, the polling GETs, the MULTI of the snapshot.
        counts = without(diff_counts(before, after), info=1, get=progress.gets, multi=1)
        own = without(counts, incrby=done)  # the jobs' own INCRBY is the workload
        steady, exact = progress.steady(jobs, self.setting.window)
        result: dict[str, Any] = {
            "steady": steady, "exact": exact, "done": done, "complete": progress.complete,
            "bulk": jobs / fill["seconds"], "rss_mb": progress.peak_mb,
            "cmds_per_job": sum(own.values()) / max(done, 1),
            "commands": dict(sorted(own.items(), key=lambda kv: -kv[1])),
        }
        if mon is not None:
            result["monitor"] = monitor_figures(mon, done)
        return result

    def ready(self, server: PrivateRedis, queues: Sequence[str]) -> None:
        """Wait (up to 60 s) until the worker runs a job pushed to the last queue."""
        self.client(server, queues, ["latency", "1", "--warmup", "0", "--queue", queues[-1],
                                     "--timeout", "60"], timeout=90)

    def latency(self, count: int, warmup: int = 10) -> list[float]:
        """Enqueue -> start latencies (seconds) of ``count`` single pushes into an idle
        worker, each after an idle gap drawn from ``Setting.gaps``."""
        concurrency = self.peer.concurrency(10)
        low, high = self.setting.gaps
        args = ["latency", str(count), "--warmup", str(warmup),
                "--gap-min", repr(low), "--gap-max", repr(high)]
        with PrivateRedis() as server:
            proc = self.worker(server, concurrency, ["default"], "latency")
            try:
                result = self.client(server, ["default"], args,
                                     timeout=60 + (count + warmup) * (high + 0.5))
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}; log: {self.log_tail('latency')}") from None
            finally:
                stop_group(proc)
        latencies: list[float] = result["latencies"]
        return latencies

    def idle(self, queues: Sequence[str], seconds: float) -> dict[str, Any]:
        """Redis commands per second of an idle worker listening to ``queues``."""
        concurrency = self.peer.concurrency(10)
        name = f"idle-{len(queues)}q"
        with PrivateRedis() as server:
            proc = self.worker(server, concurrency, queues, name)
            try:
                try:
                    self.ready(server, queues)
                except RuntimeError as exc:
                    raise RuntimeError(f"{exc}; log: {self.log_tail(name)}") from None
                time.sleep(2.0)  # let the probe job's acknowledgement settle
                # MONITOR costs nothing much when idle, and splits out the calls made in Lua.
                mon = Monitor(server.port, {client_addr(server.client)})
                before = command_counts(server.client)
                started = time.monotonic()
                time.sleep(seconds)
                after = command_counts(server.client)
                elapsed = time.monotonic() - started
                mon.stop()
                alive = proc.poll() is None
            finally:
                stop_group(proc)
        if not alive:
            raise RuntimeError(f"worker exited during the idle period; log: "
                               f"{self.log_tail(name)}")
        counts = without(diff_counts(before, after), info=1)
        return {"per_second": sum(counts.values()) / elapsed, "seconds": elapsed,
                "top_per_second": sum(mon.top.values()) / elapsed,
                "lua_per_second": sum(mon.lua.values()) / elapsed,
                "commands": dict(sorted(counts.items(), key=lambda kv: -kv[1])),
                "top": dict(mon.top.most_common()), "lua": dict(mon.lua.most_common())}


def monitor_figures(mon: Monitor, done: int) -> dict[str, Any]:
    """MONITOR's counts of a drain of ``done`` jobs: top-level calls and calls inside Lua."""
    top = without(dict(mon.top), incrby=done)
    lua = dict(mon.lua)
    return {
        "top_per_job": sum(top.values()) / max(done, 1),
        "lua_per_job": sum(lua.values()) / max(done, 1),
        "top": dict(sorted(top.items(), key=lambda kv: -kv[1])),
        "lua": dict(sorted(lua.items(), key=lambda kv: -kv[1])),
        "connections": len(mon.clients),
    }
