"""The harness of the outcome matrix (``tests/integration/test_outcome_matrix.py``): one
cell's subject job pushed with one feature's options (``matrix_jobs.Subject``), and the
drivers that make it end in each outcome with real worker processes.

A driver's :meth:`Driver.reach` returns once the outcome has happened; its
:meth:`Driver.finish` lets a job whose outcome is not an end (a retry, a reschedule, a
push-back, a recovery) run again to success. Every wait is a :func:`wait_for` with a
generous timeout; nothing here measures elapsed time.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import redis

import rfetch
from rfetch.api import Api
from tests.support.record import Record
from tests.support.wait import wait_for
from tests.support.worker_fixtures import StartWorker
from tests.support.workers import WorkerProcess

WAIT = 45.0
"""Seconds any one wait may take (a loaded 2-core machine; a recovery after a KILL)."""

LONG = 600.0
"""A retry or reschedule delay no cell waits out: the job stays in its set."""

SHORT = 0.5
"""A retry or reschedule delay a cell waits out: the job then runs again and succeeds."""


def entries(r: redis.Redis, name: str) -> list[dict[str, Any]]:
    """The parsed jobs of the sorted set ``name`` (schedule, retry, dead)."""
    return [json.loads(raw) for raw in cast("list[bytes]", r.zrange(name, 0, -1))]


def in_set(r: redis.Redis, name: str, jid: str) -> bool:
    """Whether the sorted set ``name`` holds a job of ``jid``."""
    return any(job.get("jid") == jid for job in entries(r, name))


def dead_class(r: redis.Redis, jid: str) -> str | None:
    """The error class of ``jid``'s dead-set entry, or None when it has none."""
    for job in entries(r, "dead"):
        if job.get("jid") == jid:
            return str(job.get("error_class"))
    return None


def held(r: redis.Redis, jid: str) -> bool:
    """Whether a worker's private list ``queue:sq|...`` holds a job of ``jid``."""
    return any(
        json.loads(raw).get("jid") == jid
        for key in r.scan_iter(match="queue:sq|*")
        for raw in r.lrange(key, 0, -1)
    )


@dataclass
class Cell:
    """One cell's system: the Redis, the API, the record, the workers it starts, and the
    jobs it pushed (the subject, the feature's follower, the batch)."""

    r: redis.Redis
    api: Api
    record: Record
    start_worker: StartWorker
    gate: Path
    jobs: ModuleType
    feature: str
    delay: float = SHORT
    subject: str = ""
    follower: str = ""
    bid: str = ""
    workers: list[WorkerProcess] = field(default_factory=list)

    def worker(self, *args: str, ready: bool = True,
               env: dict[str, str] | None = None) -> WorkerProcess:
        """Start one more worker (``-c 2 -t 1`` unless ``args`` say otherwise, with ``env``
        on top of the defaults); with ``ready``, wait for its first heartbeat."""
        proc = self.start_worker(*(args or ("-c", "2", "-t", "1")), ready=ready,
                                 env={"RFETCH_MATRIX_GATE": str(self.gate), **(env or {})})
        self.workers.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(w.log()[-4000:] for w in self.workers)

    def wait(self, predicate: Any, what: str) -> None:
        wait_for(predicate, WAIT, lambda: f"{what} (cell {self.feature}):\n{self.logs()}")

    def open_gate(self) -> None:
        self.gate.touch()

    def push(self, behaviour: str, later: float = 0.0, **opts: Any) -> None:
        """Push the subject with ``behaviour`` and ``opts`` (``later`` seconds ahead, in the
        scheduled set, when given), and what its feature needs with it: a batch around it,
        a dependent, the key's or the cap's next job."""
        jobs = self.jobs
        if self.feature in ("after", "result"):
            opts["store_result"] = 600
        if self.feature == "key":
            opts["key"] = "k"
        if self.feature == "unique":
            opts.update(unique_for=600, unique_key="u")
        if self.feature == "cap":
            opts.update(concurrency_key="c", concurrency_limit=1)
        subject = jobs.Subject.set(**opts)
        if self.feature == "batch":
            batch = rfetch.Batch(on_success=jobs.OnSuccess, on_complete=jobs.OnComplete,
                                 on_death=jobs.OnDeath)
            with batch.jobs():
                self.subject = self._push(subject, behaviour, later)
            self.bid = batch.bid
        else:
            self.subject = self._push(subject, behaviour, later)
        follower: dict[str, dict[str, Any]] = {
            "after": {"after": self.subject},
            "key": {"key": "k"},
            "cap": {"concurrency_key": "c", "concurrency_limit": 1},
        }
        if self.feature in follower:
            self.follower = jobs.Next.set(**follower[self.feature]).perform_async()

    def _push(self, setter: Any, behaviour: str, later: float) -> str:
        if later:
            return str(setter.perform_in(later, behaviour, self.delay))
        return str(setter.perform_async(behaviour, self.delay))

    def times(self, event: str, jid: str) -> list[float]:
        """Epoch seconds of each ``event`` line of ``jid``, in file order."""
        return [float(row[2]) for row in self.record.rows(event) if row[0] == jid]

    def callbacks(self) -> dict[str, list[float]]:
        """Batch event -> the time each of its callbacks ran."""
        found: dict[str, list[float]] = {"success": [], "complete": [], "death": []}
        for row in self.record.rows("callback"):
            if row[0] == self.bid:
                found[row[3]].append(float(row[2]))
        return found

    def done(self, jid: str) -> bool:
        return bool(self.times("done", jid))


class Driver:
    """How a cell's subject reaches one outcome."""

    behaviour = "ok"
    runs_again = False
    """Whether :meth:`finish` needs no wait: the job runs again once a worker takes it."""
    extra_processed = 0
    """Jobs other than the subject and the markers that the drive runs to success."""

    def reach(self, cell: Cell) -> None:
        """Push the subject and wait until the outcome happened. Pushed before the worker
        starts: a worker learns at its start that a queue has fetch caps."""
        cell.push(self.behaviour)
        cell.worker()
        self.happened(cell)

    def happened(self, cell: Cell) -> None:
        cell.wait(lambda: cell.done(cell.subject), "the subject's success")

    def finish(self, cell: Cell) -> None:
        """Let a job whose outcome is not an end run again to success (nothing for an
        end)."""


class Succeeded(Driver):
    pass


class Failed(Driver):
    behaviour = "flaky"

    def happened(self, cell: Cell) -> None:
        cell.wait(lambda: in_set(cell.r, "retry", cell.subject), "the subject in the retry set")

    def finish(self, cell: Cell) -> None:
        cell.wait(lambda: cell.done(cell.subject), "the subject's retry succeeding")


class Died(Driver):
    def reach(self, cell: Cell) -> None:
        cell.push("fail", retry=0)
        cell.worker()
        cell.wait(lambda: in_set(cell.r, "dead", cell.subject), "the subject in the dead set")


class Discarded(Driver):
    def reach(self, cell: Cell) -> None:
        cell.push("fail", retry=0, dead=False)
        cell.worker()
        cell.wait(lambda: cell.times("died", cell.subject), "the subject's death handler")
        cell.wait(lambda: not held(cell.r, cell.subject), "the subject gone")


class Expired(Driver):
    def reach(self, cell: Cell) -> None:
        cell.push("ok", expires_in=0.2)
        pushed = time.time()
        wait_for(lambda: time.time() > pushed + 0.5, 10, "the expiry to pass")
        cell.worker()
        cell.wait(lambda: cell.r.get("stat:expired") == b"1", "stat:expired counting it")


class CancelledWaiting(Driver):
    def reach(self, cell: Cell) -> None:
        cell.push("ok")
        state = cell.api.cancel(cell.subject).state
        # deleted from its queue, or marked where the API cannot take it (a cap's list)
        assert state in ("deleted", "marked"), state
        cell.worker()


HELD_ENV = {"RFETCH_PREFETCH_HORIZON": "60", "RFETCH_PREFETCH": "4"}
"""A worker that fetches ahead of a long job and keeps what it fetched."""


class CancelledFetched(Driver):
    """Cancelled while fetched ahead by a ``-c 1`` worker, behind a gated job: the worker
    records the cancel when it would start it."""

    extra_processed = 1  # the blocker

    def reach(self, cell: Cell) -> None:
        # both taken by the worker's first fetch; a capped subject waits for the slot of
        # a blocker of its own key instead (fetch caps fetch their own ring first)
        cap = {"concurrency_key": "c", "concurrency_limit": 1} if cell.feature == "cap" else {}
        blocker = cell.jobs.Subject.set(**cap).perform_async("gated")
        cell.push("ok")
        cell.worker("-c", "1", "-t", "1", env=HELD_ENV)
        cell.wait(lambda: cell.times("start", blocker), "the blocker's start")
        cell.wait(lambda: cell.api.explain(cell.subject).state in ("held", "waiting_cap"),
                  "the subject fetched ahead")
        # a cancel announced before the worker subscribed is not heard: the documented
        # limit (docs/guarantees.md, Cancellation), not what this cell checks
        cell.wait(lambda: cell.r.pubsub_numsub("rfetch:cancel")[0][1] >= 1,
                  "the worker's subscription to cancels")
        state = cell.api.cancel(cell.subject).state
        assert state in ("cancelling", "marked"), state
        cell.open_gate()
        cell.wait(lambda: cell.times("died", cell.subject), "the subject's death handler")
        cell.wait(lambda: not held(cell.r, cell.subject), "the subject's cancel recorded")
        assert not cell.times("start", cell.subject)


class CancelledScheduled(Driver):
    """Cancelled in the scheduled set (``perform_in``): the API deletes it."""

    def reach(self, cell: Cell) -> None:
        cell.push("ok", later=LONG)
        state = cell.api.cancel(cell.subject).state
        assert state == "deleted", state
        cell.worker()


class CancelledRetrying(Driver):
    """Cancelled in the retry set after its first failure: the API deletes it."""

    def reach(self, cell: Cell) -> None:
        cell.delay = LONG
        cell.push("flaky")
        cell.worker()
        cell.wait(lambda: in_set(cell.r, "retry", cell.subject), "the subject in the retry set")
        state = cell.api.cancel(cell.subject).state
        assert state == "deleted", state


class CancelledRunning(Driver):
    def reach(self, cell: Cell) -> None:
        cell.push("slow")
        cell.worker()
        cell.wait(lambda: cell.times("start", cell.subject), "the subject's start")
        state = cell.api.cancel(cell.subject).state
        assert state == "cancelling", state
        cell.wait(lambda: cell.times("stopped", cell.subject), "the subject stopping")
        cell.wait(lambda: cell.times("died", cell.subject), "the subject's death handler")
        cell.wait(lambda: not held(cell.r, cell.subject), "the subject's cancel recorded")


class OverLimit(Driver):
    behaviour = "overlimit"

    def happened(self, cell: Cell) -> None:
        cell.wait(lambda: in_set(cell.r, "schedule", cell.subject),
                  "the subject rescheduled")

    def finish(self, cell: Cell) -> None:
        cell.wait(lambda: cell.done(cell.subject), "the rescheduled subject succeeding")


class PushedBack(Driver):
    runs_again = True
    extra_processed = 1  # its run after the push-back

    def reach(self, cell: Cell) -> None:
        cell.push("gated")
        worker = cell.worker()
        cell.wait(lambda: cell.times("start", cell.subject), "the subject's start")
        assert worker.stop(30) == 0, worker.log()

    def finish(self, cell: Cell) -> None:
        cell.open_gate()
        cell.worker()
        cell.wait(lambda: cell.done(cell.subject), "the pushed-back subject succeeding")


class Recovered(PushedBack):
    def reach(self, cell: Cell) -> None:
        cell.push("gated")
        worker = cell.worker()
        cell.wait(lambda: cell.times("start", cell.subject), "the subject's start")
        worker.kill()

    def finish(self, cell: Cell) -> None:
        cell.open_gate()
        cell.worker()  # on the same host: recovers its killed predecessor's jobs at once
        cell.wait(lambda: cell.done(cell.subject), "the recovered subject succeeding")


class Poison(Driver):
    @staticmethod
    def ended(cell: Cell, worker: WorkerProcess) -> bool:
        """Whether the worker exited (the pill killed it) or the pill is buried."""
        return worker.proc.poll() is not None or in_set(cell.r, "dead", cell.subject)

    def reach(self, cell: Cell) -> None:
        cell.push("crash")
        for _ in range(8):
            if in_set(cell.r, "dead", cell.subject):
                break
            worker = cell.worker("-c", "1", ready=False)
            wait_for(partial(self.ended, cell, worker), WAIT, cell.logs)
        assert dead_class(cell.r, cell.subject) == "rfetch.PoisonPill", cell.logs()
        if all(w.proc.poll() is not None for w in cell.workers):
            cell.worker("-c", "1")  # runs what the feature lets go


DRIVERS: dict[str, Driver] = {
    "succeeded": Succeeded(),
    "failed": Failed(),
    "died": Died(),
    "discarded": Discarded(),
    "expired": Expired(),
    "cancelled_waiting": CancelledWaiting(),
    "cancelled_scheduled": CancelledScheduled(),
    "cancelled_retrying": CancelledRetrying(),
    "cancelled_fetched": CancelledFetched(),
    "cancelled_running": CancelledRunning(),
    "overlimit": OverLimit(),
    "pushed_back": PushedBack(),
    "recovered": Recovered(),
    "poison": Poison(),
}
"""The outcomes, each with its driver."""
