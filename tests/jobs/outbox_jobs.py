"""The job of the outbox chaos test (``tests/chaos/test_outbox_chaos.py``); a worker loads it
with ``-r outbox_jobs``. Each run appends its order id as one line (O_APPEND, one
``write(2)``) to the file ``RFETCH_OUTBOX_RAN``."""

from __future__ import annotations

import os

import rfetch


class Ship(rfetch.Job):
    """Ships one order: records that it ran."""

    def perform(self, order: str) -> None:
        fd = os.open(os.environ["RFETCH_OUTBOX_RAN"], os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                     0o644)
        try:
            os.write(fd, f"{order}\n".encode())
        finally:
            os.close(fd)
