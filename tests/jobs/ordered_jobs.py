"""Jobs with ordering keys for the real-process tests of ordering keys (``-r ordered_jobs``).

Evidence goes through ``chaos_jobs.record`` (one O_APPEND file per process under
``RFETCH_CHAOS_DIR``): ``start``/``done``/``fail`` lines whose extra field is
``<key> <seq>``, so order and overlap per key are checked from what the jobs saw, not from
Redis.
"""

from __future__ import annotations

import os
import time
from typing import Any

from chaos_jobs import record

import rfetch


def _first_time(jid: str) -> bool:
    """True exactly once per jid across processes and kills (an O_EXCL marker file)."""
    directory = os.environ.get("RFETCH_CHAOS_DIR", "/tmp")
    try:
        fd = os.open(os.path.join(directory, f"failed-{jid}"), os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class Ordered(rfetch.Job):
    """Job ``seq`` of ordering key ``key``: sleeps ``ms`` milliseconds; with ``fail_once``
    its first run fails (retried after 1 s, blocking its key meanwhile)."""

    def ordering_key(self, key: str, *rest: Any) -> str | None:
        return key

    def perform(self, key: str, seq: int, ms: float = 0, fail_once: bool = False) -> None:
        record("start", self.jid, f"{key} {seq}")
        if ms > 0:
            time.sleep(ms / 1000)
        if fail_once and _first_time(self.jid):
            record("fail", self.jid, f"{key} {seq}")
            raise RuntimeError(f"first run of {key} #{seq} fails")
        record("done", self.jid, f"{key} {seq}")

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        return 1.0
