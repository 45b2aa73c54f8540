"""Jobs of the worker smoke test (tests/integration/test_worker_smoke.py), run on every
declared Python by scripts/test-versions; events go to ``RFETCH_TEST_RECORD`` as in
``testjobs``."""

from __future__ import annotations

import os
import time

from testjobs import record

import rfetch


class Hello(rfetch.Job):
    def perform(self, name: str) -> None:
        record("done", self.jid, name)


class FailsOnce(rfetch.Job):
    """Fails on its first run (creates ``marker``), succeeds on its retry."""

    retry = 3

    def perform(self, marker: str) -> None:
        if not os.path.exists(marker):
            with open(marker, "w"):
                pass
            record("fail", self.jid)
            raise RuntimeError("the first run fails")
        record("done", self.jid)


class Nap(rfetch.Job):
    """Sleeps ``seconds``: still running when the worker is told to stop."""

    def perform(self, seconds: float) -> None:
        record("start", self.jid)
        time.sleep(seconds)
        record("done", self.jid)
