"""The pool of processor threads and the one fetcher thread that feeds them.

The fetcher moves jobs into the private lists in batches (``ReliableFetch.retrieve_work``)
and hands them to the processor threads. It keeps at most ``concurrency + prefetch`` jobs
held (running or waiting), so a process never holds more than that; on quiet, waiting jobs
are pushed back at once, and on stop everything still in the private lists is pushed back
to the head of its queue.

Acknowledgements are deferred while the queues are busy (:mod:`rfetch.worker.acks`): the
fetcher waits for room for ``min_batch`` jobs unless the threads have nothing left to run,
and sends pending acknowledgements with its next fetch within ``ACK_MAX_DELAY`` seconds.
Busy threads and the quiet flag live in the shared :class:`WorkState`.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Collection

from rfetch.config import Config
from rfetch.guard import ThreadGuard
from rfetch.store.connection import REDIS_DOWN
from rfetch.worker.acks import ACK_MAX_DELAY, DeferredAcks
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.processor import Processor
from rfetch.worker.reporting import ErrorReporter
from rfetch.worker.unit import UnitOfWork
from rfetch.worker.work_state import WorkState

log = logging.getLogger("rfetch.manager")


class Manager:
    """Runs ``config.concurrency`` processor threads fed by one fetcher thread.

    Args:
        config: concurrency, prefetch, block timeout.
        fetch: the reliable fetch of this process.
        processor: runs one job; its acknowledgement is ``acks``.
        acks: the processor's deferred acknowledgements, sent by the fetcher.
        work: busy threads and quiet flag, shared with the heartbeat and metrics.
        report: the error reporter, for internal errors.
        paused: returns the names of queues not to fetch from now (queue pausing).
    """

    def __init__(
        self,
        config: Config,
        fetch: ReliableFetch,
        processor: Processor,
        acks: DeferredAcks,
        work: WorkState,
        report: ErrorReporter,
        paused: Callable[[], Collection[str]] = frozenset,
    ) -> None:
        self.config = config
        self.fetch = fetch
        self.processor = processor
        self.acks = acks
        self.work = work
        self.report = report
        self.paused = paused
        self.capacity = config.concurrency + config.prefetch_count
        self.min_batch = max(1, self.capacity // 4)
        self._handoff: queue.SimpleQueue[UnitOfWork | None] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._held: dict[int, UnitOfWork] = {}
        self._sweep_needed = False
        self._threads: list[threading.Thread] = []
        self._fetcher: threading.Thread | None = None
        self.guard = ThreadGuard("fetch", log, report, fetch.redis, first=0.1, cap=5.0)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the processor threads and the fetcher."""
        for index in range(self.config.concurrency):
            thread = threading.Thread(
                target=self._process_loop, name=f"rfetch-processor-{index}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        self._fetcher = threading.Thread(
            target=self._fetch_loop, name="rfetch-fetcher", daemon=True
        )
        self._fetcher.start()

    @property
    def quiet(self) -> bool:
        """Whether fetching has stopped."""
        return self.work.quiet

    def quiet_down(self) -> None:
        """Stop fetching; push back jobs fetched but not started. Running jobs go on."""
        with self._cond:
            self.work.go_quiet()
            self.acks.close()
            waiting = []
            while True:
                try:
                    unit = self._handoff.get_nowait()
                except queue.Empty:
                    break
                if unit is not None:
                    waiting.append(unit)
                    self._held.pop(id(unit), None)
            self._cond.notify_all()
        if waiting:
            self._requeue(waiting, "quiet")

    def release(self, paused: Collection[str]) -> None:
        """Push back jobs fetched from queues that were just paused and not started yet."""
        if not paused:
            return
        with self._cond:
            keep: list[UnitOfWork | None] = []
            released: list[UnitOfWork] = []
            while True:
                try:
                    unit = self._handoff.get_nowait()
                except queue.Empty:
                    break
                if unit is not None and unit.queue in paused:
                    released.append(unit)
                    self._held.pop(id(unit), None)
                else:
                    keep.append(unit)
            for item in keep:
                self._handoff.put(item)
            self._cond.notify_all()
        if released:
            self._requeue(released, "queue paused")

    def busy(self) -> int:
        """Threads running a job now."""
        return self.work.busy()

    def finish(self) -> int:
        """End the pool: push back everything still in this process's private lists.

        Jobs still running are pushed back to the head of their queue (their threads are
        abandoned when the process exits; a late acknowledgement finds nothing to remove).

        Returns:
            The number of jobs pushed back.
        """
        self.quiet_down()
        if self._fetcher is not None:
            self._fetcher.join(self.config.block_timeout + self.config.network_timeout)
        for _ in self._threads:
            self._handoff.put(None)
        try:
            return self.fetch.requeue_unheld((), "shutdown")
        except REDIS_DOWN as exc:
            log.error(
                "could not push back unfinished jobs, Redis is unreachable (%s); they stay in "
                "the private lists and are recovered as orphans",
                exc,
            )
            return 0

    # -- threads -----------------------------------------------------------------------

    def _process_loop(self) -> None:
        ident = threading.get_ident()
        while True:
            unit = self._handoff.get()
            if unit is None:
                return
            self.work.begin(ident, unit)
            try:
                self.processor.process(unit)
            except BaseException as exc:  # an rfetch bug: keep the thread, sweep the job
                log.exception("internal error while processing a job; it will be pushed back")
                self.report(exc, {"context": "processor"})
                with self._cond:
                    self._sweep_needed = True
            finally:
                self.work.end(ident)
                with self._cond:
                    self._held.pop(id(unit), None)
                    # Wake the fetcher only when it has a reason to fetch: room for a batch,
                    # or threads about to starve (waking it per job costs a GIL hand-off).
                    if (
                        self.capacity - len(self._held) >= self.min_batch
                        or self._handoff.empty()
                        or self.work.quiet
                    ):
                        self._cond.notify_all()

    def _next_request(self) -> tuple[int, list[UnitOfWork], bool, list[UnitOfWork]] | None:
        """Wait until there is room for a batch (or threads starve, or acks are due).

        Returns (room, acks, sweep, held), or None when quiet.
        """
        with self._cond:
            while not self.work.quiet:
                room = self.capacity - len(self._held)
                starving = self._handoff.empty()
                if (room > 0 and (starving or room >= self.min_batch)) or self.acks.due():
                    return room, self.acks.take(), self._sweep_needed, list(self._held.values())
                self._cond.wait(ACK_MAX_DELAY)
        return None

    def _fetch_loop(self) -> None:
        self.acks.deferring(True)
        idle = False
        while True:
            request = self._next_request()
            if request is None:
                self._flush_acks()
                return
            room, acks, sweep, held = request
            try:
                if sweep:
                    # Finished jobs whose acks are still pending are not strays.
                    self.fetch.requeue_unheld([*held, *acks], "a reply lost to a connection error")
                    with self._cond:
                        self._sweep_needed = False
                paused = self.paused()
                if idle and not acks and room > 0 and not self.fetch.broken and (
                    len(self.config.queues) == 1 or not self.fetch.any_waiting(paused)
                ):
                    units = []  # still idle: go straight back to blocking
                else:
                    units = self.fetch.retrieve_work(room, paused, acks)
                acks = []
                if not units and room > 0:
                    units = self._block(paused)
                idle = not units
            except Exception as exc:
                # Any error (a lost connection, a reply error such as OOM or READONLY, a
                # bug) pauses fetching with a back-off; the fetcher itself never ends.
                self.acks.put_back(acks)
                if isinstance(exc, REDIS_DOWN):  # a move's reply may have been lost
                    with self._cond:
                        self._sweep_needed = True
                self.work.sleep(self.guard.failed(exc))
                continue
            self.guard.succeeded()
            if units:
                self._hand_off(units)

    def _block(self, paused: Collection[str]) -> list[UnitOfWork]:
        """Blocking fetch; meanwhile threads acknowledge their jobs themselves."""
        for unit in self.acks.deferring(False):
            unit.acknowledge()
        try:
            if self.work.quiet:
                return []
            return self.fetch.wait_for_work(paused)
        finally:
            self.acks.deferring(True)

    def _flush_acks(self) -> None:
        for unit in self.acks.take():
            unit.acknowledge()

    def _hand_off(self, units: list[UnitOfWork]) -> None:
        paused = self.paused()
        late = [u for u in units if u.queue in paused]  # a BLMOVE racing a pause
        with self._cond:
            if not self.work.quiet:
                for unit in units:
                    if unit.queue not in paused:
                        self._held[id(unit)] = unit
                        self._handoff.put(unit)
                if late:
                    self._requeue(late, "queue paused")
                return
        self._requeue(units, "fetched while going quiet")

    def _requeue(self, units: list[UnitOfWork], why: str) -> None:
        try:
            pushed = self.fetch.requeue(units)
            log.info("pushed back %d job(s) not started (%s)", pushed, why)
        except REDIS_DOWN as exc:
            log.error("could not push back %d job(s) (%s): %s", len(units), why, exc)
