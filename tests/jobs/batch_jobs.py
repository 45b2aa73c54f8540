"""Jobs of the batch tests (``tests/integration/test_batches.py``, ``tests/chaos``); workers
load them with ``-r batch_jobs``.

Evidence is kept outside Redis, one line per event appended (O_APPEND, one ``write(2)``) to
``<RFETCH_BATCH_DIR>/<pid>.log``, words separated by tabs: ``run <jid>``, ``fail <jid>``,
``ok <jid>`` (the job returned) and ``callback <event> <bid> <status JSON> <options JSON>``.
A job that fails on its first attempt leaves a marker file
``<RFETCH_BATCH_DIR>/failed-<jid>`` so its next run succeeds, whichever process runs it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from evidence import append_line

import rfetch


def record(*words: str) -> None:
    """Append one evidence line for this process."""
    directory = os.environ.get("RFETCH_BATCH_DIR")
    if not directory:
        return
    line = "\t".join((*words, f"{time.time():.6f}")) + "\n"
    append_line(os.path.join(directory, f"{os.getpid()}.log"), line)


class Item(rfetch.Job):
    """One batched job: sleeps ``ms``; with ``fail_first``, fails on its first attempt.
    Retries come after 1 s (``retry_in``), so a chaos run stays short."""

    def perform(self, n: int, fail_first: bool = False, ms: float = 0) -> None:
        record("run", self.jid)
        if ms:
            time.sleep(ms / 1000)
        if fail_first:
            marker = os.path.join(os.environ.get("RFETCH_BATCH_DIR", "."), f"failed-{self.jid}")
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                record("fail", self.jid)
                raise RuntimeError(f"first attempt of item {n}")
        record("ok", self.jid)

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        return 1.0


class Doomed(rfetch.Job):
    """Dies on its first failure (``retry = 0``: straight to the dead set)."""

    retry = 0

    def perform(self, n: int) -> None:
        record("run", self.jid)
        raise RuntimeError(f"doomed {n}")


class Spawner(rfetch.Job):
    """Adds ``count`` Items to its own batch while it runs (Sidekiq Pro's reopening)."""

    def perform(self, count: int) -> None:
        record("run", self.jid)
        batch = self.batch
        assert batch is not None, "Spawner runs in a batch"
        with batch.jobs():
            for n in range(count):
                Item.perform_async(1000 + n, False, 50)
        record("ok", self.jid)


class ParentStep(rfetch.Job):
    """Creates a child batch of ``count`` slow Items inside its own (parent) batch."""

    def perform(self, count: int) -> None:
        record("run", self.jid)
        child = rfetch.Batch(description="child", on_success=OnSuccess)
        with child.jobs():
            for n in range(count):
                Item.perform_async(2000 + n, False, 200)
        record("child", child.bid)
        record("ok", self.jid)


class _Callback(rfetch.Job):
    event = ""

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None:
        record("callback", self.event, status["bid"], json.dumps(status, separators=(",", ":")),
               json.dumps(options, separators=(",", ":")))


class OnSuccess(_Callback):
    event = "success"


class OnComplete(_Callback):
    event = "complete"


class OnDeath(_Callback):
    event = "death"


class Discarded(rfetch.Job):
    """Fails once and is dropped (``retry = False``): a death in its batch."""

    retry = False

    def perform(self, n: int) -> None:
        record("run", self.jid)
        raise RuntimeError(f"discarded {n}")


class ChordBody(rfetch.Job):
    """A chord's callback: its signature's own arguments (here the header's bid, given by
    the test)."""

    def perform(self, label: str) -> None:
        record("callback", "chord", label)
