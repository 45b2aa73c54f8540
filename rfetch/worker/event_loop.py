"""Async jobs (``async def perform``) on one event-loop thread per worker process.

The manager's fetcher hands the pool the async jobs it fetched (reliable fetch, the same
private lists, acknowledgements and retries as the threads' jobs); the pool runs at most
``config.async_concurrency`` of them at once as tasks of its loop, the others waiting in
order. Each running job is one entry of the shared :class:`WorkState`, marked as a loop
slot's, so the heartbeat, the busy count and the shutdown wait see async jobs as they see
threads, and the published figures count them apart (:mod:`rfetch.worker.capacity`).

Shutdown (TERM): the launcher waits up to ``shutdown_timeout`` for running jobs; then
:meth:`AsyncPool.cancel` cancels the async jobs still running (their ``perform`` gets
``CancelledError`` at its current ``await``) and the manager pushes them back to the head of
their queue with every other unfinished job, as it does for threads. A job cancelled there
is neither acknowledged nor retried.

The loop's default executor (``run_in_executor(None, ...)``) has up to
``async_concurrency`` threads, created as needed: it runs what would block the loop (a
failure's retry, the Redis work of a coalesced key, a sync server middleware around an
async job, an acknowledgement that cannot ride on the next fetch).

With hundreds of jobs at once, the loop's own work per job is what bounds the throughput,
so what can be done once for every job that starts or ends in one pass of the loop is:
the jobs that ended in a pass are settled together in one callback (their slots freed in
the manager under one lock and one wake-up of the fetcher, the waiting jobs started in
their place), and the jobs started together are marked started with one ``HSET`` of many
fields (:meth:`StartMarks.mark_many`), sent before any of them runs. A finished job's
acknowledgement rides on the fetcher's next call while the fetcher defers them
(:class:`DeferredAcks`); when it does not (it blocks on empty queues, or the process is
quiet), the pass's acknowledgements go to the executor as one batch, so the loop never waits
for a round trip, and :meth:`AsyncPool.cancel` waits for those batches before the manager
pushes back what is left in the private lists.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from rfetch.errors import InvalidJob
from rfetch.jobs.payload import loads
from rfetch.worker.acks import DeferredAcks
from rfetch.worker.context import WorkerContext
from rfetch.worker.processor import Handled, Processor
from rfetch.worker.registry import Registry
from rfetch.worker.started import StartMarks
from rfetch.worker.unit import UnitOfWork

log = logging.getLogger("rfetch.manager")

CALL_TIMEOUT = 5.0
"""Seconds another thread waits for the loop to answer (a job that blocks the loop with
sync code delays it)."""


class LoopHost(Protocol):
    """What the pool shares with the manager that feeds it."""

    marks: StartMarks
    """Where a job's start is written before it starts (poison-pill counting), under the
    name of its slot (``a<n>``, n < ``async_concurrency``)."""
    acks: DeferredAcks
    """The deferred acknowledgements the fetcher sends with its next call."""

    def async_done(self, ended: list[tuple[UnitOfWork, Handled]]) -> None:
        """Called in the loop thread with the jobs whose execution ended in one pass of the
        loop (finished, failed, cancelled) and how each was left (:data:`Handled`: after
        rfetch itself failed around it the manager sweeps its private lists), so the
        manager frees their slots."""
        ...


class AsyncPool:
    """The event-loop thread of a worker process and the async jobs it runs.

    Args:
        context: config (``async_concurrency``: jobs running at once), work state (busy
            state shared with the heartbeat), error reporter (internal errors).
        processor: runs one job (:meth:`Processor.aprocess`).
        registry: which job classes are async (routing, :meth:`accepts`).
        host: the manager (start marks, deferred acknowledgements, ended jobs).
    """

    def __init__(
        self, context: WorkerContext, processor: Processor, registry: Registry, host: LoopHost
    ) -> None:
        self.size = context.config.async_concurrency
        self.marks = host.marks
        self.acks = host.acks
        self._free_slots = list(range(self.size - 1, -1, -1))  # touched only in the loop
        self.processor = processor
        self.registry = registry
        self.work = context.work
        self.report = context.report
        self.on_done = host.async_done
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        # Touched only in the loop thread:
        self._waiting: deque[UnitOfWork] = deque()
        self._running: dict[asyncio.Task[None], UnitOfWork] = {}
        self._ended: list[tuple[UnitOfWork, Handled]] = []  # settled once per pass
        self._unacked: list[UnitOfWork] = []  # acknowledged once per pass, in the executor
        self._acking: set[asyncio.Future[None]] = set()  # those batches, until sent
        self._settle_due = False
        self._cancelling = False

    # -- from other threads ----------------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread."""
        self._thread = threading.Thread(
            target=self._run, name="rfetch-event-loop", daemon=True
        )
        self._thread.start()

    def accepts(self, unit: UnitOfWork) -> bool:
        """Whether ``unit`` is a job of an async class (else the threads run it). In a
        worker whose classes are all async, every job is (an unknown or invalid one then
        fails here as it would on a thread)."""
        if not self.registry.has_sync:
            return True
        try:
            name = loads(unit.raw)["class"]  # orjson when installed: on the fetcher's path
        except InvalidJob:
            return False
        cls = self.registry.get(name)
        return cls is not None and cls.is_async

    def submit(self, units: Sequence[UnitOfWork]) -> None:
        """Run ``units`` (in order, as slots free up)."""
        self._loop.call_soon_threadsafe(self._admit, list(units))

    def idle(self) -> bool:
        """Whether no async job is running or waiting (a hint: read without the loop)."""
        return not self._running and not self._waiting

    def take_waiting(self, queues: Collection[str] | None = None) -> list[UnitOfWork]:
        """Remove and return the jobs not started yet (of ``queues``, or all), for the
        manager to push back (quiet, a paused queue). Empty when the loop does not answer
        within ``CALL_TIMEOUT``: those jobs then start later, or are pushed back at stop."""

        if self._thread is None:
            return []

        def take() -> list[UnitOfWork]:
            keep = [u for u in self._waiting if queues is not None and u.queue not in queues]
            taken = [u for u in self._waiting if queues is None or u.queue in queues]
            self._waiting = deque(keep)
            return taken

        return self._call(take, [])

    def cancel(self, timeout: float) -> int:
        """Cancel every async job still running and wait up to ``timeout`` seconds for them
        to end (TERM past the shutdown timeout); none starts after this. Returns how many
        were cancelled. They stay in the private lists, for the manager to push back."""
        if self._thread is None:
            return 0

        async def cancel_all() -> int:
            self._cancelling = True
            self._waiting.clear()
            tasks = list(self._running)
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)
            self._settle()  # what ended meanwhile: acknowledged before the push-back
            if self._acking:
                await asyncio.wait(self._acking, timeout=timeout)
            return len(tasks)

        try:
            future = asyncio.run_coroutine_threadsafe(cancel_all(), self._loop)
            return future.result(timeout + CALL_TIMEOUT)
        except (concurrent.futures.TimeoutError, RuntimeError):
            log.error("the event loop did not answer the cancellation of its async jobs")
            return 0

    def stop(self) -> None:
        """Stop the loop (after :meth:`cancel`)."""
        if self._thread is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._loop.stop)

    # -- in the loop thread --------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.set_default_executor(
            concurrent.futures.ThreadPoolExecutor(self.size, thread_name_prefix="rfetch-async")
        )
        while True:
            try:
                self._loop.run_forever()
                return  # stop() was called
            except BaseException:  # a callback raised through the loop: keep the loop
                log.exception("event loop error; the loop goes on")

    def _admit(self, units: list[UnitOfWork]) -> None:
        self._waiting.extend(units)
        self._fill()

    def _fill(self) -> None:
        """Start waiting jobs on the free slots; their start marks go out in one write,
        before any of them can run (the tasks run after this callback returns)."""
        waiting, free, running = self._waiting, self._free_slots, self._running
        started: list[tuple[str, UnitOfWork]] = []
        create_task, execute = self._loop.create_task, self._execute
        while waiting and free and not self._cancelling:
            unit = waiting.popleft()
            number = free.pop()
            started.append((f"a{number}", unit))
            running[create_task(execute(unit, number))] = unit
        if started:
            self.marks.mark_many(started)

    async def _execute(self, unit: UnitOfWork, number: int) -> None:
        task = asyncio.current_task()
        assert task is not None
        slot = id(task)
        self.work.begin(slot, unit, looped=True)
        handled: Handled = "done"
        try:
            await self.processor.aprocess(unit, lambda: self._cancelling, self._ack, slot)
        except asyncio.CancelledError:
            pass  # stays in the private list: pushed back at stop
        except BaseException as exc:  # rfetch failed on the job: keep the loop, bound it
            handled = await self._rfetch_failed(unit, exc)
        finally:
            self.work.end(slot)
            self._running.pop(task, None)
            self._free_slots.append(number)
            self._ended.append((unit, handled))
            self._settle_soon()

    def _ack(self, unit: UnitOfWork) -> None:
        """A finished job's acknowledgement, in the loop thread: with the fetcher's next
        call when it defers them, else in this pass's batch (:meth:`_settle`)."""
        if not self.acks.defer(unit):
            self._unacked.append(unit)
            self._settle_soon()

    def _settle_soon(self) -> None:
        if not self._settle_due:
            self._settle_due = True
            self._loop.call_soon(self._settle)

    def _settle(self) -> None:
        """Once per pass of the loop: send the pass's acknowledgements that could not be
        deferred (one executor call), free the ended jobs' slots in the manager (one call),
        and start waiting jobs in their place."""
        self._settle_due = False
        unacked, self._unacked = self._unacked, []
        if unacked:
            future = self._loop.run_in_executor(None, self._acknowledge, unacked)
            self._acking.add(future)
            future.add_done_callback(self._acking.discard)
        ended, self._ended = self._ended, []
        if ended:
            self.on_done(ended)
            self._fill()

    def _acknowledge(self, units: list[UnitOfWork]) -> None:
        """In the executor: acknowledge ``units`` (each deferred again if the fetcher defers
        them by now), one at a time as a thread's job is (retried while Redis is
        unreachable); one whose acknowledgement raises is handed to
        :meth:`Processor.rfetch_failed`, as a thread's job is."""
        for unit in units:
            try:
                self.acks(unit)
            except Exception as exc:  # as when a thread's acknowledgement raises
                handled = self.processor.rfetch_failed(unit, exc)
                self._loop.call_soon_threadsafe(self.on_done, [(unit, handled)])

    async def _rfetch_failed(self, unit: UnitOfWork, exc: BaseException) -> Handled:
        """:meth:`Processor.rfetch_failed` in the loop's executor: the job is pushed back
        counting such attempts, or buried at ``poison_max_recoveries``, as a thread's is."""
        log.error("internal error while processing an async job", exc_info=exc)
        try:
            return await self._loop.run_in_executor(
                None, self.processor.rfetch_failed, unit, exc
            )
        except BaseException as again:  # cancelled at shutdown, or the report raised
            log.error("could not settle the job rfetch failed on (%r)", again)
            return "stuck"

    def _call(self, function: Callable[[], list[UnitOfWork]], default: list[UnitOfWork]
              ) -> list[UnitOfWork]:
        async def call() -> list[UnitOfWork]:
            return function()

        try:
            return asyncio.run_coroutine_threadsafe(call(), self._loop).result(CALL_TIMEOUT)
        except (concurrent.futures.TimeoutError, RuntimeError):
            log.error("the event loop did not answer within %.0f s", CALL_TIMEOUT)
            return default
