"""Jobs of the wake-up tests (tests/integration/test_wake.py): each records its start to
the file named by ``RFETCH_TEST_RECORD`` (``<event> <jid> <pid> <time> <label>``, as
``testjobs.record``; imported by the tests too, so it imports no other job module)."""

from __future__ import annotations

import os
import time
from typing import Any

import rfetch


def record(event: str, jid: str, label: str) -> None:
    line = f"{event} {jid} {os.getpid()} {time.time():.6f} {label}\n".encode()
    fd = os.open(os.environ["RFETCH_TEST_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


class Mark(rfetch.Job):
    """Records ``start`` with ``label`` (the queue it was pushed to), then sleeps
    ``seconds``."""

    name = "wake_jobs.Mark"  # the worker imports this module as wake_jobs, a test as tests.jobs

    def perform(self, label: str, seconds: float = 0.0) -> None:
        record("start", self.jid, label)
        time.sleep(seconds)


class CallbackOnC(rfetch.Job):
    """A batch callback that runs on queue ``c``."""

    name = "wake_jobs.CallbackOnC"
    queue = "c"

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None:
        record("start", self.jid, "callback")
