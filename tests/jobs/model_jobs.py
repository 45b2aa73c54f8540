"""Jobs of the model-based test (``tests/model``); workers load them with ``-r model_jobs``.

One class, :class:`Scripted`, whose first argument names a scripted behaviour, so that every
option combination can be pushed on it. Evidence is kept outside Redis: each process
appends lines ``<event>\\t<jid>\\t<pid>\\t<time>\\t<extra>`` to
``<RFETCH_MODEL_DIR>/<pid>.log`` (O_APPEND, one ``write(2)`` per line, so a line survives a
SIGKILL a moment later). Events: ``start``, ``ok`` (perform returned), ``fail`` (perform
raised), ``stopped`` (a cooperative job saw its cancel or deadline), ``callback`` (a batch
callback ran; extra = ``<event> <bid>``) and ``died`` (a death handler; extra = the
error class).
"""

from __future__ import annotations

import os
import time
from typing import Any

from evidence import append_line, first_time, record_deaths

import rfetch


def record(event: str, jid: str, extra: str = "") -> None:
    """Append one evidence line for this process."""
    directory = os.environ.get("RFETCH_MODEL_DIR")
    if not directory:
        return
    line = f"{event}\t{jid}\t{os.getpid()}\t{time.time():.6f}\t{extra}\n"
    append_line(os.path.join(directory, f"{os.getpid()}.log"), line)


def _first_attempt(jid: str) -> bool:
    """True the first time it is asked for ``jid`` across every process (a marker file)."""
    return first_time(os.path.join(os.environ.get("RFETCH_MODEL_DIR", "."), f"failed-{jid}"))


FULL = rfetch.Limiter.window(
    "model-full", 1, per=86400, ttl=3 * 86400, wait_timeout=0, reschedule=1,
    backoff=lambda n, job: 0.2,
)
"""A limiter whose one grant a day the test takes first (``tests/model/conftest.py``):
every call from a job is over the limit; a job is rescheduled once (0.2 s), then its
next ``OverLimit`` is a normal failure."""


class Scripted(rfetch.Job):
    """Runs the behaviour its first argument names:

    - ``ok``: returns at once;
    - ``flaky``: raises ``RuntimeError`` on its first attempt, then returns;
    - ``fail``: always raises ``RuntimeError``;
    - ``overlimit``: calls the :data:`FULL` limiter (``rfetch.OverLimit``);
    - ``slow``: works ``seconds`` (second argument) in 20 ms steps, stopping at the first
      ``check_cancelled`` that says so (a cancel or TERM while running).

    Retries come after 0.2 s, so an example stays short.
    """

    def perform(self, behaviour: str, seconds: float = 0.0, *rest: Any) -> Any:
        record("start", self.jid, behaviour)
        if behaviour == "slow":
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                try:
                    self.check_cancelled()
                except (rfetch.JobTimeout, rfetch.JobCancelled) as exc:
                    record("stopped", self.jid, type(exc).__name__)
                    raise
                time.sleep(0.02)
        elif behaviour == "overlimit":
            try:
                with FULL.within_limit():
                    pass
            except rfetch.OverLimit:
                record("overlimit", self.jid, behaviour)
                raise
        elif behaviour == "fail" or (behaviour == "flaky" and _first_attempt(self.jid)):
            record("fail", self.jid, behaviour)
            raise RuntimeError(f"scripted failure of {behaviour}")
        record("ok", self.jid, behaviour)
        return behaviour

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        return 0.2


class OnSuccess(rfetch.Job):
    """A batch's success callback."""

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None:
        record("callback", self.jid, f"success {status['bid']}")


class OnComplete(rfetch.Job):
    """A batch's complete callback."""

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None:
        record("callback", self.jid, f"complete {status['bid']}")


class OnDeath(rfetch.Job):
    """A batch's death callback."""

    def perform(self, status: dict[str, Any], options: dict[str, Any]) -> None:
        record("callback", self.jid, f"death {status['bid']}")


def configure_worker(config: rfetch.Config) -> None:
    """Record every death a worker sees, with its error class."""
    record_deaths(config, record)
