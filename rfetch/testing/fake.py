"""Sidekiq::Testing.fake!'s queues, with a clock for scheduled jobs and retries."""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections.abc import Sequence
from typing import Any

from rfetch.config import Config
from rfetch.errors import UnknownJob
from rfetch.jobs.job import Job
from rfetch.jobs.payload import Payload, Routing
from rfetch.push.buffer import BufferedJob
from rfetch.push.sink import Send
from rfetch.testing import assertions
from rfetch.testing.clock import FakeClock
from rfetch.testing.retries import fail
from rfetch.testing.runner import JobRunner, find_job_class, read_job


class FakeQueues:
    """Sidekiq::Testing.fake!'s queues: every pushed job, in memory, in push order, and the
    dead set of a drain with retries. It is a test mode (:class:`rfetch.push.sink.TestMode`):
    it keeps what Clients write and never calls Redis. Thread-safe.

    Args:
        config: the server middleware that :meth:`drain` runs jobs through; with
            ``retries=True``, ``max_retries``, ``death_handlers``, ``backtrace_lines_default``.
        clock: when scheduled jobs and retries are due (default: a :class:`FakeClock`
            that follows ``time.time()``).
        rng: the retry backoff's jitter (Sidekiq's ``rand(10)``).
    """

    def __init__(
        self,
        config: Config | None = None,
        clock: FakeClock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config if config is not None else Config()
        self.runner = JobRunner(self.config)
        self.clock = clock if clock is not None else FakeClock()
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._jobs: list[Payload] = []
        self._dead: list[Payload] = []

    def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool]:
        """Keep ``jobs`` (a Client calls this; ``send`` is not used)."""
        payloads = [read_job(job) for job in jobs]
        with self._lock:
            self._jobs.extend(payloads)
        return [True] * len(payloads)

    def now(self) -> float:
        """The fake clock's time (epoch seconds): every push reads it in fake mode."""
        return self.clock.now()

    def advance(self, seconds: float | dt.timedelta) -> float:
        """Move the fake clock forward (see :meth:`FakeClock.advance`); the new time.

        Raises:
            ConfigError: a negative or non-numeric interval.
        """
        return self.clock.advance(seconds)

    def jobs(
        self, job_class: type[Job] | None = None, *, queue: str | None = None
    ) -> list[Payload]:
        """The waiting jobs (payload dicts; ``at`` on scheduled jobs and retries, which
        also carry ``retry_count`` and ``error_class``), oldest push first.

        Args:
            job_class: only this class's jobs (matched by its registered name).
            queue: only this queue's jobs.
        """
        with self._lock:
            return [dict(p) for p in self._jobs if _selected(p, job_class, queue)]

    def dead(self, job_class: type[Job] | None = None) -> list[Payload]:
        """The jobs a drain with ``retries=True`` sent to the dead set (retries exhausted,
        or ``retry_in`` returned ``"kill"``), with their error fields, oldest first."""
        with self._lock:
            return [dict(p) for p in self._dead if _selected(p, job_class, None)]

    def clear(self, job_class: type[Job] | None = None, *, queue: str | None = None) -> int:
        """Forget waiting jobs (all, or one class's or queue's) and, with no filter, the
        dead set; how many waiting jobs were removed."""
        with self._lock:
            kept = [p for p in self._jobs if not _selected(p, job_class, queue)]
            removed = len(self._jobs) - len(kept)
            self._jobs = kept
            if job_class is None and queue is None:
                self._dead = []
            return removed

    def __len__(self) -> int:
        with self._lock:
            return len(self._jobs)

    def perform_one(self, job_class: type[Job] | None = None) -> Payload:
        """Take the oldest waiting job (of ``job_class``) and run it; its payload. A due
        job goes first; else the next scheduled one, the clock moved to its time.

        Raises:
            LookupError: no such job is waiting.
            Exception: whatever the job raised (it is not put back).
        """
        batch = self._next((job_class,) if job_class is not None else (), True)
        if batch is None:
            name = job_class.job_name() if job_class is not None else "such"
            raise LookupError(f"no {name} job is waiting")
        self.runner.run(*self._execution(batch))
        return batch[0]

    def drain(
        self, *job_classes: type[Job], retries: bool = False, scheduled: bool = True
    ) -> int:
        """Run waiting jobs (of ``job_classes``, or all) until none is left, jobs they push
        included; how many executions ran. A coalesced key's waiting jobs run as one
        execution, as on a worker. Jobs due now run first, oldest push first; then, with
        ``scheduled``, each scheduled job or retry in time order, the clock moved to its
        time (so a job sees the time it was scheduled for, and pushes relative to it).

        Args:
            retries: False (Sidekiq::Testing's drain): the first exception a job raises is
                raised here, that job gone, the others still waiting. True (a worker's
                rules): a failed job is retried as a worker would (``retry``,
                ``retry_in``, Sidekiq's backoff, ``retries_exhausted``, the death handlers)
                and ends in :meth:`dead` when its retries run out; nothing is raised.
            scheduled: True: scheduled jobs and retries run too, the clock moved forward
                to each one's time. False: only jobs due by the clock now (move it with
                :meth:`advance`, freezegun or time-machine); later ones keep waiting.

        Raises:
            Exception: with ``retries=False``, the first exception a job raised.
            UnknownJob: no class of a job's name is defined (never retried).
        """
        ran = 0
        while (batch := self._next(job_classes, scheduled)) is not None:
            holder, args = self._execution(batch)
            try:
                self.runner.run(holder, args)
            except UnknownJob:
                raise
            except Exception as exc:
                if not retries:
                    raise
                self._failed(holder, exc)
            ran += 1
        return ran

    async def adrain(
        self, *job_classes: type[Job], retries: bool = False, scheduled: bool = True
    ) -> int:
        """:meth:`drain` for a test running in an event loop: async jobs are awaited in it."""
        ran = 0
        while (batch := self._next(job_classes, scheduled)) is not None:
            holder, args = self._execution(batch)
            try:
                await self.runner.arun(holder, args)
            except UnknownJob:
                raise
            except Exception as exc:
                if not retries:
                    raise
                self._failed(holder, exc)
            ran += 1
        return ran

    def assert_enqueued(
        self,
        job_class: type[Job],
        *,
        args: Sequence[Any] | None = None,
        queue: str | None = None,
        at: float | dt.datetime | None = None,
        delay: float | dt.timedelta | None = None,
        count: int | None = None,
    ) -> list[Payload]:
        """Assert that ``job_class`` has waiting jobs that match; the matching payloads.
        See :func:`rfetch.testing.assert_enqueued`.

        Raises:
            AssertionError: none matches (or not ``count``), with the waiting jobs listed.
        """
        return assertions.assert_enqueued(
            self.jobs(job_class), job_class, args=args, queue=queue, at=at, delay=delay,
            count=count,
        )

    def assert_not_enqueued(
        self, job_class: type[Job], *, args: Sequence[Any] | None = None,
        queue: str | None = None,
    ) -> None:
        """Assert that no waiting job of ``job_class`` matches.

        Raises:
            AssertionError: one does, with the matching jobs listed.
        """
        assertions.assert_enqueued(
            self.jobs(job_class), job_class, args=args, queue=queue, count=0
        )

    def _failed(self, payload: Payload, exc: Exception) -> None:
        """Record a failed execution with retries on: back in the queues as a retry, in
        the dead set, or dropped."""
        job = dict(payload)
        job.pop("at", None)
        try:
            instance: Job | None = find_job_class(job["class"])()
        except UnknownJob:
            instance = None
        outcome = fail(job, instance, exc, self.config, self.clock.now(), self._rng)
        with self._lock:
            if outcome == "retry":
                self._jobs.append(job)
            elif outcome == "dead":
                self._dead.append(job)

    def _next(
        self, job_classes: Sequence[type[Job] | None], scheduled: bool
    ) -> list[Payload] | None:
        """Remove and return the next execution's jobs: the oldest selected job due now,
        else (``scheduled``) the earliest scheduled one, the clock moved to its time; with,
        when it coalesces, the other waiting jobs of its key and class. None: none left."""
        names = {c.job_name() for c in job_classes if c is not None}
        now = self.clock.now()
        with self._lock:
            selected = [
                (i, p) for i, p in enumerate(self._jobs) if not names or p["class"] in names
            ]
            due = [(i, p) for i, p in selected if p.get("at") is None or p["at"] <= now]
            if due:
                index, payload = due[0]
            elif scheduled and selected:
                index, payload = min(selected, key=lambda item: (item[1]["at"], item[0]))
                self.clock.advance_to(payload["at"])
            else:
                return None
            del self._jobs[index]
            return [payload, *self._coalesced_with(payload)]

    def _coalesced_with(self, payload: Payload) -> list[Payload]:
        """Take the other waiting jobs of ``payload``'s coalesced key (holds the lock)."""
        key = payload.get("ordering_key")
        if not payload.get("coalesce") or key is None:
            return []
        same = [
            p for p in self._jobs
            if p.get("ordering_key") == key and p["class"] == payload["class"]
            and p["queue"] == payload["queue"] and p.get("coalesce")
        ]
        self._jobs = [p for p in self._jobs if not any(p is s for s in same)]
        return same

    @staticmethod
    def _execution(batch: list[Payload]) -> tuple[Payload, list[Any] | None]:
        """The payload to run and its arguments (None: its own; a coalesced key's batch:
        the argument lists in score order, or the newest one's arguments for "last")."""
        holder = batch[0]
        if len(batch) == 1 and not holder.get("coalesce"):
            return holder, None
        ordered = sorted(batch, key=lambda p: Routing.of(p).score)
        if holder.get("coalesce") == "last":
            return holder, ordered[-1]["args"]
        return holder, [[p["args"] for p in ordered]]


def _selected(payload: Payload, job_class: type[Job] | None, queue: str | None) -> bool:
    if job_class is not None and payload["class"] != job_class.job_name():
        return False
    return queue is None or payload["queue"] == queue
