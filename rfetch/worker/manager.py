"""The pool of processor threads and the one fetcher thread that feeds them.

The fetcher moves jobs into the private lists in batches (``ReliableFetch.retrieve_work``)
and hands them to the processor threads. It holds at most ``concurrency`` jobs plus the
fetch-ahead allowance of :class:`rfetch.worker.prefetch.PrefetchPolicy` (running or
waiting), so a job waits in this process only while a thread is expected to take it soon,
never behind long jobs while another process could run it; on quiet, waiting jobs are
pushed back at once, and on stop everything still in the private lists is pushed back to
the head of its queue.

When a fetch finds nothing and no job waits, the blocking fetch (``BLMOVE``) is run by an
idle processor thread, which then runs the job it gets itself
(:mod:`rfetch.worker.blocking_fetch`). Jobs pushed back, and the sweep of strays from the
private lists, are :mod:`rfetch.worker.push_back`'s.

A job that waited long enough for this process to have been stalled past its heartbeat
TTL (SIGSTOP, a VM pause, swap, a debugger) may have been recovered as an orphan and run
elsewhere meanwhile: before starting it, a thread checks that it is still in the private
list (``ReliableFetch.holds``) and drops it otherwise.

Acknowledgements are deferred while the queues are busy (:mod:`rfetch.worker.acks`): the
fetcher waits for room for a quarter of its capacity unless the threads have nothing left
to run, and sends pending acknowledgements with its next fetch within ``ACK_MAX_DELAY``
seconds. Busy threads and the quiet flag live in the shared :class:`WorkState`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection

from rfetch.guard import ThreadGuard
from rfetch.store.connection import REDIS_DOWN
from rfetch.worker.acks import ACK_MAX_DELAY, DeferredAcks
from rfetch.worker.blocking_fetch import BlockingHandOff
from rfetch.worker.context import WorkerContext
from rfetch.worker.event_loop import AsyncPool
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.fetch_room import FetchRoom
from rfetch.worker.handoff import BlockingFetch, HandOff, Request
from rfetch.worker.head_peek import async_next
from rfetch.worker.prefetch import PrefetchPolicy
from rfetch.worker.processor import Handled, Processor
from rfetch.worker.push_back import PushBack
from rfetch.worker.stall import StallGuard
from rfetch.worker.started import StartMarks
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.manager")

CANCEL_WAIT = 2.0
"""Seconds the stop waits for cancelled async jobs to unwind before pushing them back."""


class Manager:
    """Runs ``config.concurrency`` processor threads fed by one fetcher thread.

    Args:
        context: config (concurrency, prefetch, prefetch horizon, block timeout,
            heartbeat interval), work state (busy threads and quiet flag, shared with the
            heartbeat and metrics), error reporter (internal errors).
        fetch: the reliable fetch of this process.
        processor: runs one job; its acknowledgement is ``acks``.
        acks: the processor's deferred acknowledgements, sent by the fetcher.
        paused: returns the names of queues not to fetch from now (queue pausing).

    When the processor's registry has async job classes, the manager also runs an
    :class:`AsyncPool` (one event-loop thread, ``config.async_concurrency`` jobs at once)
    and hands it the async jobs it fetches; the process then holds at most ``concurrency
    + async_concurrency + prefetch`` jobs, and ``concurrency + prefetch`` while only sync
    jobs come (:class:`FetchRoom`: the loop's slots are room for async jobs only). The
    threads stay: an idle one runs the blocking fetch, and hands an async job it gets to the
    loop. A thread or loop slot marks each job it starts (:class:`StartMarks`) for
    poison-pill counting.
    """

    def __init__(
        self,
        context: WorkerContext,
        fetch: ReliableFetch,
        processor: Processor,
        acks: DeferredAcks,
        paused: Callable[[], Collection[str]] = frozenset,
    ) -> None:
        config = self.config = context.config
        self.fetch = fetch
        self.processor = processor
        self.acks = acks
        self.work = context.work
        report = self.report = context.report
        self.paused = paused
        self.prefetch = PrefetchPolicy(
            config.concurrency, config.prefetch_count, config.prefetch_horizon
        )
        self.stall = StallGuard(config, fetch)
        registry = processor.registry  # no fetch slots with async jobs (they end elsewhere)
        slots = 0 if registry.has_async else config.concurrency
        self.marks = StartMarks(fetch.redis, fetch.keys, fetch.identity, slots)
        self.pool = HandOff(config.concurrency)
        self.aio = AsyncPool(context, processor, registry, self) if registry.has_async else None
        self.room = FetchRoom(config.concurrency, config.prefetch_count,
                              self.aio.size if self.aio is not None else 0, not registry.has_sync)
        self._low_water = config.concurrency
        self.push_back = PushBack(fetch, self.pool, report, self.marks)
        self.blocking = BlockingHandOff(context, self)
        self._threads: list[threading.Thread] = []
        self._fetcher: threading.Thread | None = None
        self.guard = ThreadGuard("fetch", log, report, fetch.redis, first=0.1, cap=5.0)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the processor threads, the event loop (async jobs) and the fetcher."""
        if self.aio is not None:
            self.aio.start()
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
        self.work.go_quiet()
        if self.fetch.waker is not None:
            self.fetch.waker.interrupt()  # a blocking fetch under way ends now
        # Outside the lock: the loop thread takes it when a job ends.
        looped = self.aio.take_waiting() if self.aio is not None else []
        with self.pool.cond:
            self.acks.close()
            waiting = self.pool.take_waiting(lambda unit: True, quiet=True)
            for unit in looped:
                self.pool.release(unit)
            waiting += looped
            self.pool.cond.notify_all()
        if waiting:
            self.push_back.requeue(waiting, "quiet")

    def release(self, paused: Collection[str]) -> None:
        """Push back jobs fetched from queues that were just paused and not started yet."""
        if not paused:
            return
        looped = self.aio.take_waiting(paused) if self.aio is not None else []
        with self.pool.cond:
            released = self.pool.take_waiting(lambda unit: unit.queue in paused, quiet=False)
            for unit in looped:
                self.pool.release(unit)
            released += looped
            self.pool.cond.notify_all()
        if released:
            self.push_back.requeue(released, "queue paused")

    def saturated(self) -> bool:
        """Whether a fetched job waits for a thread, or every thread runs a job (adaptive
        affinity judges only such moments)."""
        with self.pool.cond:
            return self.pool.waiting() > 0 or len(self.pool.started) >= self.config.concurrency

    def busy(self) -> int:
        """Jobs running now (threads and async jobs)."""
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
            self.pool.queue.put(None)
        if self.aio is not None:
            cancelled = self.aio.cancel(CANCEL_WAIT)
            if cancelled:
                log.info("cancelled %d async job(s) still running", cancelled)
            self.aio.stop()
        self.marks.close()
        try:
            return self.fetch.requeue_unheld((), "shutdown")
        except REDIS_DOWN as exc:
            log.error(
                "could not push back unfinished jobs, Redis is unreachable (%s); they stay in "
                "the private lists and are recovered as orphans",
                exc,
            )
            return 0

    # -- processor threads -------------------------------------------------------------

    def _process_loop(self) -> None:
        ident = threading.get_ident()
        while True:
            item = self.pool.queue.get()
            if item is None:
                return
            if isinstance(item, BlockingFetch):
                unit = self.blocking.run(ident, item)
                if unit is not None:
                    self._run(ident, unit, time.monotonic())
            else:
                self._run(ident, item, None)

    def split(self, units: list[UnitOfWork]) -> tuple[list[UnitOfWork], list[UnitOfWork]]:
        """The async jobs (for the event loop) and the others (for the threads)."""
        if self.aio is None:
            return [], units
        looped = [unit for unit in units if self.aio.accepts(unit)]
        with self.pool.cond:
            self.room.observed(len(units), len(looped))
        if not looped:
            return [], units
        ids = {id(unit) for unit in looped}
        with self.pool.cond:
            self.pool.looped |= ids
        return looped, [unit for unit in units if id(unit) not in ids]

    def async_done(self, ended: list[tuple[UnitOfWork, Handled]]) -> None:
        """Async jobs ended (called in the loop thread, once per pass of the loop): free
        their slots, with one wake-up of the fetcher; after rfetch failed on one, as for a
        thread's job (see :meth:`Processor.rfetch_failed`)."""
        with self.pool.cond:
            for unit, handled in ended:
                self.pool.release(unit)
                if handled != "done":
                    if handled == "stuck":  # not swept back: pushed back at shutdown
                        self.push_back.stuck[id(unit)] = unit
                    self.push_back.ask_sweep("taken by an async job rfetch failed on")
            self.pool.cond.notify_all()

    def _run(self, ident: int, unit: UnitOfWork, started: float | None) -> None:
        """Run one job; ``started`` is its start time when already marked started (a job
        this thread fetched itself), else the job came through the hand-off queue and is
        checked for a stall first."""
        now = started if started is not None else time.monotonic()
        if started is None:
            with self.pool.cond:
                _, sent_at = self.pool.held.get(id(unit), (unit, now))
                fresh = self.stall.fresh(now - sent_at)
                if fresh:
                    self.pool.started[ident] = now
            if not fresh:
                if self.stall.lost(unit, now - sent_at):
                    self._done(ident, unit, None)
                    return
                now = time.monotonic()
                with self.pool.cond:
                    self.pool.started[ident] = now
        self.marks.mark(f"t{ident:x}", unit)  # before perform: poison-pill counting
        self.work.begin(ident, unit)
        try:
            try:
                handled = self.processor.process(unit)
            except BaseException as exc:  # a bug past the processor's own guard
                handled = self.processor.rfetch_failed(unit, exc)
            if handled != "done":
                with self.pool.cond:
                    if handled == "stuck":
                        # Redis refused to push it back: not swept back to its queue either
                        # (it would run again at once, in a loop); pushed back at shutdown.
                        self.push_back.stuck[id(unit)] = unit
                    # jobs it had taken (coalescing) go back
                    self.push_back.ask_sweep("taken by a job rfetch failed on")
        finally:
            self.work.end(ident)
            self._done(ident, unit, time.monotonic() - now)

    def _done(self, ident: int, unit: UnitOfWork, seconds: float | None) -> None:
        with self.pool.cond:
            self.pool.started.pop(ident, None)
            self.pool.held.pop(id(unit), None)
            self.marks.ended(unit)
            if seconds is not None:
                self.prefetch.finished(seconds)
            # Wake the fetcher only when it has a reason to fetch: room for a batch, or
            # threads about to starve (waking it per job costs a GIL hand-off).
            if (
                len(self.pool.held) <= self._low_water
                or len(self.pool.held) <= len(self.pool.started)
                or self.work.quiet
            ):
                self.pool.cond.notify_all()

    # -- the fetcher -------------------------------------------------------------------

    def _next_request(self, idle: bool) -> Request | None:
        """Wait until there is room for a batch (or threads starve, acks are due, waiting
        jobs must be given back, or a probe is due); after a fetch that found nothing
        (``idle``), until a thread is free with no job waiting. None when quiet."""
        with self.pool.cond:
            while not self.work.quiet:
                now = time.monotonic()
                ready = self.prefetch.ready_soon(self.pool.started.values(), now)
                waiting = self.pool.waiting()
                # Threads and loop slots are separate room (worker/fetch_room.py).
                plan = self.room.plan(
                    self.config.concurrency + self.prefetch.allowance(ready),
                    len(self.pool.held), len(self.pool.looped), waiting,
                    self.aio is not None and self.aio.idle(), now)
                self._low_water = plan.low_water
                give_back = []
                if self.prefetch.give_back(waiting, ready):
                    give_back = self.pool.take_waiting(lambda unit: True, quiet=False)
                # After an empty fetch, fetch again once a thread is free with nothing
                # waiting (or to probe); else once threads starve or there is room for a
                # batch (an idle loop starves only while async jobs come).
                wanted = plan.probe or (self.pool.thread_free() if idle else plan.eager)
                # A sweep goes at once: the strays it pushes back wait for no thread here.
                sweep = self.push_back.sweep is not None
                if give_back or sweep or self.acks.due() or (plan.room > 0 and wanted):
                    held = [unit for unit, _ in self.pool.held.values()]
                    held += self.push_back.stuck.values()
                    self.push_back.sweep_seen = self.push_back.sweep_asks
                    return Request(plan.room, self.acks.take(), self.push_back.sweep, held,
                                   give_back, plan.probe)
                self.pool.cond.wait(ACK_MAX_DELAY)
        return None

    def _fetch_loop(self) -> None:
        self.acks.deferring(True)
        idle = False
        while True:
            request = self._next_request(idle)
            if request is None:
                self._flush_acks()
                return
            room, acks, sweep, held, give_back, probe = request
            if give_back:
                self.push_back.requeue(
                    give_back, "waiting behind long jobs: given back to the queue")
            try:
                if sweep:
                    # Finished jobs whose acks are still pending are not strays.
                    self.push_back.swept(sweep, [*held, *acks])
                paused = self.paused()
                sent_at = time.monotonic()
                if room <= 0 or (probe and not async_next(self.fetch, self.aio, paused)) or (
                    idle and not probe and not acks and not self.fetch.broken
                    and (len(self.config.queues) == 1 or not self.fetch.any_waiting(paused))):
                    units = []  # no room, still idle, or no async job next for a probe
                    if acks:
                        self.fetch.retrieve_work(0, paused, acks)
                else:
                    units = self.fetch.retrieve_work(room, paused, acks)
                acks = []
                if units:
                    self._hand_off(units, sent_at)
                elif room > 0 and self.pool.thread_free():
                    units = self.blocking.block(paused)
                # Idle only after looking for jobs and finding none (not after a call that
                # only acknowledged, or gave back, for want of room).
                idle = room > 0 and not units
            except Exception as exc:
                # Any error (a lost connection, a reply error such as OOM or READONLY, a
                # bug) pauses fetching with a back-off; the fetcher itself never ends.
                self.acks.put_back(acks)
                with self.pool.cond:  # a lost reply, or a script error after it moved jobs
                    self.push_back.ask_sweep(
                        "a reply lost to a connection error"
                        if isinstance(exc, REDIS_DOWN)
                        else "moved by a fetch that failed"
                    )
                self.work.sleep(self.guard.failed(exc))
                continue
            self.guard.succeeded()

    def _flush_acks(self) -> None:
        for unit in self.acks.take():
            unit.acknowledge()

    def _hand_off(self, units: list[UnitOfWork], sent_at: float) -> None:
        with self.pool.cond:
            idle = self.pool.idle()
        self.marks.handed(units[:idle])  # one write for the jobs idle threads take at once
        with self.pool.cond:
            admitted, rejected = self.pool.admit(units, sent_at, self.work.quiet, self.paused())
            looped, threaded = self.split(admitted)
            for unit in threaded:
                self.pool.queue.put(unit)
        if looped and self.aio is not None:
            self.aio.submit(looped)
        if rejected:
            self.push_back.requeue(rejected, "fetched while going quiet or pausing")
