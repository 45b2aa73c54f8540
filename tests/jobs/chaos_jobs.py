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
