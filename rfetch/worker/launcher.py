"""One worker process: wires the parts, handles signals, heartbeat, poller and shutdown.

Signals (Sidekiq's):

* TSTP: quiet. Stop fetching, push back jobs fetched but not started, finish running jobs,
  keep heartbeating with ``quiet=true``, do not exit.
* TERM / INT: quiet, wait up to ``shutdown_timeout`` seconds for running jobs, push the
  unfinished ones back to the head of their queue, exit 0. A second TERM/INT stops at once
  (still pushing back), as RQ's second signal does.
* USR1: recycle (what a swarm's parent sends for ``--max-memory``, ``--max-jobs`` and
  USR2): quiet, let the running jobs finish with no deadline, exit 0. Nothing is pushed
  back, so nothing runs twice; a TERM meanwhile stops it as above.
* TTIN: log every thread's stack.

The same names popped from ``<identity>-signals`` by the heartbeat act the same way.

When the timekeeper stopped a job the hard way (time limit or ignored cancel), the process
retires: it says so on its status pipe (a swarm's parent forks the replacement at once),
then shuts down as on TERM and exits ``EXIT_RETIRED`` (75). In a swarm it also reports its
job count to the parent and stops as on TERM if the parent dies.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from redis import Redis

from rfetch.config import Config
from rfetch.formatting import safe_url
from rfetch.observability.log_context import JobContext
from rfetch.periodic.assembly import leader_service
from rfetch.periodic.current import CURRENT
from rfetch.store.connection import connect
from rfetch.swarm.channel import EXIT_RETIRED, StatusWriter, Supervision
from rfetch.version import __version__
from rfetch.worker.ack_replicas import AckReplicas
from rfetch.worker.acks import DeferredAcks
from rfetch.worker.cancels import CancelMarks
from rfetch.worker.capacity import Capacity
from rfetch.worker.context import WorkerContext
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.heartbeat import Heartbeat, make_identity
from rfetch.worker.manager import Manager
from rfetch.worker.orphan_recovery import OrphanRecovery
from rfetch.worker.pausing import PauseWatcher
from rfetch.worker.preflight import warn_about_redis
from rfetch.worker.processor import Processor
from rfetch.worker.registry import Registry
from rfetch.worker.retry import JobRetry
from rfetch.worker.scheduled import Poller
from rfetch.worker.server_steps import server_steps
from rfetch.worker.timekeeper import Timekeeper

log = logging.getLogger("rfetch.launcher")

HANDLED_SIGNALS = ("TERM", "INT", "TSTP", "TTIN", "USR1")


def set_title(text: str) -> None:
    """Set the process title (``ps``, ``top``) when setproctitle is available."""
    try:
        import setproctitle
    except ImportError:  # pragma: no cover - a declared dependency
        return
    setproctitle.setproctitle(text)


@dataclass(frozen=True)
class Hosting:
    """How a launcher is hosted in its process.

    Attributes:
        supervision: set in a swarm's child (``rfetch worker --processes``): its status
            pipe, parent and slot; None for a worker on its own.
        own_signals: install the TERM/INT/TSTP/TTIN handlers in :meth:`Launcher.run`;
            False when a :class:`rfetch.worker.shards.ShardedLauncher` owns them and
            forwards each signal to :attr:`Launcher.events`.
        job_context: marks the running job for the application's log records (the one
            :func:`rfetch.observability.logs.setup_logging` filters with; default: a new one).
    """

    supervision: Supervision | None = None
    own_signals: bool = True
    job_context: JobContext | None = None


class Launcher:
    """A worker process: builds every part once around one :class:`WorkerContext` (one
    Redis client, one set of key names, one error reporter, one :class:`Commands`) and
    hands each part the context and its own collaborators.

    Args:
        config: the settings.
        registry: the jobs this process may run.
        redis: an existing client (default: connect to ``config.redis_url``).
        identity: the process identity (default: a new ``host:pid:hex``).
        hosting: a swarm's supervision, signal ownership and the log context of the
            running job (default: a worker on its own, owning its signals).
    """

    def __init__(
        self,
        config: Config,
        registry: Registry,
        redis: Redis | None = None,
        identity: str | None = None,
        hosting: Hosting | None = None,
    ) -> None:
        hosting = hosting or Hosting()
        self.config = config
        self.registry = registry
        self.own_signals = hosting.own_signals
        supervision = self.supervision = hosting.supervision
        self.status = supervision.status if supervision is not None else StatusWriter(None)
        if redis is None:
            # Threads, the worker's own threads, and the event loop's executor threads (a
            # failure's retry of an async job); connections open only when used.
            extra = config.async_concurrency if registry.has_async else 0
            redis = connect(config, max_connections=config.concurrency + 8 + extra)
        context = self.context = WorkerContext.build(
            config, redis, identity or make_identity(), hosting.job_context
        )
        self.identity, self.redis, self.keys = context.identity, redis, context.keys
        self.commands, self.report = context.commands, context.report
        self.stats, self.work = context.stats, context.work
        self.events: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._wire_jobs(context)
        self._wire_threads(context)
        self._stop_threads = threading.Event()
        self._deadline: float | None = None
        self._recycling = False
        self._exit_code = 0
        self._retire_reason = ""

    def _wire_jobs(self, context: WorkerContext) -> None:
        """The parts a job goes through: fetch, processor and its steps, pool."""
        config = self.config
        self.fetch = ReliableFetch(context)
        self.acks = DeferredAcks(
            after=AckReplicas(config).after_ack if config.min_replicas_acks else None
        )
        self.job_retry = JobRetry(config, self.keys)
        self.cancels = CancelMarks(self.redis, self.keys)
        steps = server_steps(context, self.job_retry, self.acks, self.cancels)
        self.processor = Processor(context, self.registry, self.job_retry, steps, self.acks)
        self.pause_watcher = PauseWatcher(context, on_change=self._paused, cancels=self.cancels)
        self.manager = Manager(
            context, self.fetch, self.processor, self.acks, paused=self.pause_watcher.paused
        )

    def _wire_threads(self, context: WorkerContext) -> None:
        """The process's own threads: heartbeat, timekeeper, poller, recovery, leader."""
        supervision = self.supervision
        self.heartbeat = Heartbeat(
            context,
            self.events.put,
            renew=self.fetch.write_leases,
            extra_info=(
                {"swarm": supervision.swarm, "slot": supervision.slot}
                if supervision is not None else None
            ),
            capacity=self.capacity,
        )
        self.timekeeper = Timekeeper(context, self.job_retry, retire=self._retire)
        self.poller = Poller(context)
        self.recovery = OrphanRecovery(context, self.fetch, self.job_retry)
        self.periodic = leader_service(self.config, self.commands, self.identity, self.report)

    @property
    def capacity(self) -> Capacity:
        """Threads and loop slots: what ``concurrency`` counts in the heartbeat and title."""
        pool = self.manager.aio
        return Capacity(self.config.concurrency, pool.size if pool is not None else 0)

    def _paused(self, names: frozenset[str]) -> None:
        """The paused queues changed: push back jobs of those not started yet."""
        self.manager.release(names)

    def run(self) -> int:
        """Run until TERM/INT; returns the exit code (0 after a clean shutdown)."""
        if self.own_signals:
            self._install_signal_handlers()
        pool = self.manager.aio
        log.info(
            "rfetch %s starting: identity=%s redis=%s namespace=%s concurrency=%d%s "
            "queues=%s jobs=%d",
            __version__,
            self.identity,
            safe_url(self.config.redis_url),
            self.config.namespace or "(none)",
            self.config.concurrency,
            f" async_concurrency={pool.size}" if pool is not None else "",
            ",".join(f"{q.name}:{q.weight}" for q in self.config.queues),
            len(self.registry),
        )
        log.info("job classes: %s", ", ".join(self.registry.names()) or "(none)")
        self._prepare()
        self.manager.start()
        CURRENT.set(self.periodic.lease)
        for target, name in (
            (self.periodic.run, "leader"),
            (self.heartbeat.run, "heartbeat"),
            (self.poller.run, "poller"),
            (self.recovery.run, "recovery"),
            (self.pause_watcher.run, "pause-watcher"),
            (self.timekeeper.run, "timekeeper"),
            *([(self.fetch.waker.run, "waker")] if self.fetch.waker is not None else []),
        ):
            threading.Thread(
                target=target, args=(self._stop_threads,), name=f"rfetch-{name}", daemon=True
            ).start()
        self._update_title()
        self.status.ready()
        while True:
            try:
                event = self.events.get(timeout=self._wait_slice())
            except queue.Empty:
                event = None
            if event is not None:
                self._handle(event)
            self._tell_supervisor()
            self._update_title()
            if self._finished():
                return self._shutdown()

    def _prepare(self) -> None:
        """Before fetching: warn about Redis settings that break the guarantees, beat once
        (so no private list exists without a known identity), recover the jobs of this
        host's dead processes at once, and read the paused queues and the pending cancel
        marks so none is fetched from, or started, in the first moments. None of it may
        stop the start: when Redis refuses (down, ``OOM``, ``READONLY``), the worker starts
        anyway, logs it, and its threads keep trying."""
        warn_about_redis(self.redis)
        if not self.heartbeat.beat():
            log.warning("starting without a heartbeat written; the heartbeat keeps trying")
        self.recovery.recover_host()
        try:
            self.pause_watcher.refresh()
            self.cancels.reload()
        except Exception as exc:
            log.error("could not read the paused queues or cancel marks yet: %s", exc)

    def _finished(self) -> bool:
        """Time to shut down: stopping (TERM) and idle or past ``-t``, or recycling (USR1)
        and idle."""
        if self._deadline is not None:
            return self.manager.busy() == 0 or time.monotonic() >= self._deadline
        return self._recycling and self.manager.busy() == 0

    def _wait_slice(self) -> float:
        if self._deadline is None and not self._recycling:
            return 1.0
        return 0.05

    def _handle(self, event: str) -> None:
        if event == "TSTP":
            self.periodic.step_down()
            if not self.manager.quiet:
                log.info("quiet: no new jobs will be fetched")
                self.manager.quiet_down()
        elif event in ("TERM", "INT"):
            self.periodic.step_down()
            if self._deadline is None:
                log.info(
                    "shutting down: waiting up to %.1f s for %d running job(s)",
                    self.config.shutdown_timeout,
                    self.manager.busy(),
                )
                self.manager.quiet_down()
                self._deadline = time.monotonic() + self.config.shutdown_timeout
            else:
                log.info("second %s: stopping now", event)
                self._deadline = time.monotonic()
        elif event == "USR1":
            self._recycle()
        elif event == "TTIN":
            self._dump_threads()
        elif event == "RETIRE":
            self._retire_now()
        else:
            log.warning("ignored signal %s", event)

    def _recycle(self) -> None:
        """USR1, a swarm's recycle (``--max-memory``, ``--max-jobs``, USR2): go quiet and
        exit 0 once the running jobs have finished, with no ``-t`` deadline: a recycle is
        not a deploy, so no job is pushed back and run twice because of it (Celery's
        ``max_memory_per_child`` also lets the child finish its task). A TERM arriving
        meanwhile is a real stop: ``-t``, then push back."""
        self.periodic.step_down()
        if self._recycling or self._deadline is not None:
            return
        self._recycling = True
        log.info("recycling: no new jobs will be fetched; exiting once %d running job(s) "
                 "finish", self.manager.busy())
        self.manager.quiet_down()

    def _shutdown(self) -> int:
        busy = self.manager.busy()
        if busy:
            log.info("%d job(s) still running at the deadline; pushing them back", busy)
        self.periodic.step_down()
        CURRENT.set(None)
        pushed = self.manager.finish()
        self._stop_threads.set()
        self.heartbeat.clear()
        log.info("stopped (%d job(s) pushed back)", pushed)
        if self._exit_code == EXIT_RETIRED:
            log.warning("retired (%s): exiting with %d to be replaced", self._retire_reason,
                        EXIT_RETIRED)
        return self._exit_code

    def _retire(self, reason: str) -> None:
        """Called by the timekeeper (its thread) after a job was stopped the hard way."""
        self._retire_reason = reason
        self.events.put("RETIRE")

    def _retire_now(self) -> None:
        """Leave so that a fresh process takes over: tell the supervisor (which forks the
        replacement now), then shut down as on TERM; the exit code is ``EXIT_RETIRED``."""
        if self._exit_code == EXIT_RETIRED:
            return
        self._exit_code = EXIT_RETIRED
        self.status.retiring(self._retire_reason)
        log.warning("retiring: %s", self._retire_reason)
        if self._deadline is None:
            self._handle("TERM")

    def _tell_supervisor(self) -> None:
        """Report the jobs run (``--max-jobs``), and stop if the supervisor has died."""
        supervision = self.supervision
        if supervision is None:
            return
        self.status.jobs(self.stats.lifetime)
        if self._deadline is None and os.getppid() != supervision.parent_pid:
            log.warning("the swarm's parent (pid %d) is gone: stopping", supervision.parent_pid)
            self._handle("TERM")

    def _install_signal_handlers(self) -> None:
        for name in HANDLED_SIGNALS:
            signal.signal(getattr(signal, f"SIG{name}"), self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        # SimpleQueue.put is reentrant: safe in a signal handler.
        self.events.put(signal.Signals(signum).name[3:])

    def _update_title(self) -> None:
        state = ""
        if self._deadline is not None:
            state = " stopping"
        elif self._recycling:
            state = " recycling"
        elif self.manager.quiet:
            state = " quiet"
        tag = f" {self.config.tag}" if self.config.tag else ""
        busy = self.capacity.title(self.work.occupancy())
        set_title(f"rfetch {__version__}{tag} {busy}{state}")

    def _dump_threads(self) -> None:
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            stack = "".join(traceback.format_stack(frame))
            log.info("thread %s (%x):\n%s", names.get(ident, "?"), ident, stack)
