"""Jobs for the chaos suite (``tests/chaos``, ``contrib/chaos``); workers load them with
``-r chaos_jobs``.

Evidence of execution is kept outside Redis, so loss and duplicates are counted from it and
not from rfetch's own bookkeeping: each process appends lines
``<event> <jid> <pid> <time> <extra>`` to its own file ``<RFETCH_CHAOS_DIR>/<pid>.log``,
opened with O_APPEND. A line is one ``write(2)``, so it is in the kernel once the call
returns and survives a SIGKILL of the process a moment later.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import rfetch

_lock = threading.Lock()
_fds: dict[int, int] = {}


def _fd() -> int | None:
    directory = os.environ.get("RFETCH_CHAOS_DIR")
    if not directory:
        return None
    pid = os.getpid()
    with _lock:
        fd = _fds.get(pid)
        if fd is None:
            path = os.path.join(directory, f"{pid}.log")
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            _fds[pid] = fd
        return fd


def record(event: str, jid: str, extra: str = "") -> None:
    """Append one evidence line for this process."""
    fd = _fd()
    if fd is None:
        return
    os.write(fd, f"{event} {jid} {os.getpid()} {time.time():.6f} {extra}\n".encode())


class Work(rfetch.Job):
    """Sleeps ``ms`` milliseconds, recording start and finish."""

    def perform(self, ms: float = 0, *rest: Any) -> None:
        record("start", self.jid)
        if ms > 0:
            time.sleep(ms / 1000)
        record("done", self.jid)


class Tick(rfetch.Job):
    """Does nothing but record that it ran (the claim test)."""

    def perform(self, *args: Any) -> None:
        record("done", self.jid)


class Crash(rfetch.Job):
    """Kills its own process without any cleanup: a poison pill."""

    def perform(self, *args: Any) -> None:
        record("start", self.jid)
        os._exit(1)


class Big(rfetch.Job):
    """Takes a huge argument and records its length."""

    def perform(self, data: str, *rest: Any) -> None:
        record("start", self.jid)
        record("done", self.jid, str(len(data)))


class Square(rfetch.Job):
    """Records start and finish, and returns ``n * n`` as its recorded result."""

    name = "chaos_jobs.Square"  # the same name imported as tests.jobs.chaos_jobs
    store_result = 3600

    def perform(self, n: int, ms: float = 0) -> int:
        record("start", self.jid)
        if ms > 0:
            time.sleep(ms / 1000)
        record("done", self.jid)
        return n * n


class FailsTwice(rfetch.Job):
    """Records each run; fails while fewer than ``fails`` runs of its jid were recorded
    before (counted in this job's evidence), retried after 1 s."""

    name = "chaos_jobs.FailsTwice"
    retry = 5

    def perform(self, name: str, fails: int = 0) -> str:
        runs = _runs(self.jid)
        record("start", self.jid, name)
        if runs < fails:
            record("fail", self.jid, name)
            raise RuntimeError(f"{name} fails on run {runs + 1}")
        record("done", self.jid, name)
        return name

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        return 1.0


class Reporter(rfetch.Job):
    """Reports progress, then waits until the file ``<RFETCH_CHAOS_DIR>/release`` exists."""

    name = "chaos_jobs.Reporter"

    def perform(self, percent: float, message: str) -> None:
        self.progress(percent, message)
        record("progress", self.jid)
        directory = os.environ.get("RFETCH_CHAOS_DIR", "")
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(directory, "release")):
            if time.monotonic() > deadline:
                raise RuntimeError("never released")
            time.sleep(0.05)
        record("done", self.jid)


def _runs(jid: str) -> int:
    """How many ``start`` lines of ``jid`` every process recorded so far."""
    directory = os.environ.get("RFETCH_CHAOS_DIR")
    if not directory:
        return 0
    count = 0
    for name in os.listdir(directory):
        if name.endswith(".log"):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                count += sum(1 for line in f if line.startswith(f"start {jid} "))
    return count

