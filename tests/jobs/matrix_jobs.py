"""Jobs of the outcome matrix (``tests/integration/test_outcome_matrix.py``); workers load
them with ``-r matrix_jobs``.

Evidence goes to the file named by ``RFETCH_TEST_RECORD`` (``tests/support/record.py``), one
``<event> <jid> <pid> <time> [extra]`` line per event, appended with O_APPEND: ``start``,
``done`` (perform returned), ``fail`` (perform raised), ``overlimit``, ``stopped`` (a
cooperative job saw its cancel), ``callback`` (jid field = the bid, extra = the event) and
``died`` (a death handler; extra = the error class).
"""

from __future__ import annotations

import os
import time
from typing import Any

from evidence import first_time, record_deaths
from testjobs import record

import rfetch


def gate_open() -> bool:
    """Whether the file ``RFETCH_MATRIX_GATE`` exists (a gated job may then return)."""
    path = os.environ.get("RFETCH_MATRIX_GATE", "")
    return bool(path) and os.path.exists(path)


def first_attempt(jid: str) -> bool:
    """True the first time it is asked for ``jid`` across every process (a marker file
    beside the record)."""
    return first_time(f"{os.environ.get('RFETCH_TEST_RECORD', 'record')}.first-{jid}")


class Subject(rfetch.Job):
    """The job whose ending a cell drives; ``behaviour`` is one of

    - ``ok``: returns at once;
    - ``flaky``: raises on its first attempt, then returns;
    - ``fail``: always raises;
    - ``overlimit``: raises ``rfetch.OverLimit`` (one reschedule allowed) on its first
      attempt, then returns;
    - ``slow``: works up to 60 s cooperatively, stopping at a cancel;
    - ``gated``: waits (not cooperatively) until the gate file exists, then returns;
    - ``crash``: ends its process with ``os._exit`` until the gate file exists.

    ``delay`` is the seconds before a retry or an over-limit reschedule.
    """

    def perform(self, behaviour: str, delay: float = 0.5) -> str:
        record("start", self.jid, behaviour)
        if behaviour == "slow":
            self._slow()
        elif behaviour == "gated":
            while not gate_open():
                time.sleep(0.05)
        elif behaviour == "crash" and not gate_open():
            os._exit(1)
        elif behaviour == "overlimit" and first_attempt(self.jid):
            record("overlimit", self.jid)
            raise rfetch.OverLimit("matrix limiter full", "matrix", "window", 0.0, 1,
                                   lambda n, job: delay)
        elif behaviour == "fail" or (behaviour == "flaky" and first_attempt(self.jid)):
            record("fail", self.jid)
            raise RuntimeError(f"scripted failure ({behaviour})")
        record("done", self.jid)
        return behaviour

    def _slow(self) -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                self.check_cancelled()
            except rfetch.JobCancelled:
                record("stopped", self.jid)
                raise
            time.sleep(0.02)

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        args = job.get("args") or []
        return float(args[1]) if len(args) > 1 else 0.5


class Next(rfetch.Job):
    """The job a feature lets go after the subject: its key's next job, a dependent, the
    next job of its concurrency key, a marker."""

    def perform(self, *args: Any) -> None:
        record("start", self.jid)
        record("done", self.jid)


class _Callback(rfetch.Job):
    event = ""

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None:
        record("callback", str(status["bid"]), self.event)


class OnSuccess(_Callback):
    event = "success"


class OnComplete(_Callback):
    event = "complete"


class OnDeath(_Callback):
    event = "death"


def configure_worker(config: rfetch.Config) -> None:
    """Record every death a worker sees, with its error class."""
    record_deaths(config, record)
