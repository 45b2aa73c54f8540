"""One worker process over several shards (``Config.shards``).

The process runs one :class:`~rfetch.worker.launcher.Launcher` per shard that holds any of
its queues, each with that shard's queues only: its own fetcher and processors, heartbeat
(a separate identity on each shard), poller, orphan recovery, pause watcher and timekeeper,
all against that shard's Redis. A shard that goes down stops only its own launcher's work
(its threads back off and retry as with one Redis); the other shards' queues go on.

Each shard has its own leader for periodic jobs, which pushes the periodic jobs of that
shard's queues only.

The signals are handled here, once, and forwarded to every launcher: TSTP quiets all, TERM
stops all within ``-t`` (the launchers wait in parallel), USR1 recycles all (each exits once
its running jobs finished), TTIN dumps the threads. When one
launcher stops on its own (a retire after a hard time limit), the others are stopped too, so
the process exits as one worker would.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

from rfetch.config import Config
from rfetch.formatting import safe_url
from rfetch.jobs.schedule import Schedule
from rfetch.observability.log_context import JobContext
from rfetch.push.shards import queues_by_shard, shard_config, shard_of
from rfetch.worker.capacity import Busy, Capacity
from rfetch.worker.launcher import HANDLED_SIGNALS, Hosting, Launcher
from rfetch.worker.registry import Registry

log = logging.getLogger("rfetch.worker")


class ShardedLauncher:
    """Launchers of one worker process, one per shard of its queues.

    Args:
        config: the settings, with ``shards`` (and optionally ``shard_map``).
        registry: the jobs this process may run.
        job_context: marks the running job for the application's log records.

    Raises:
        ConfigError, RedisUnavailable: as :func:`rfetch.store.connection.connect`, for any
            shard.
    """

    def __init__(
        self, config: Config, registry: Registry, job_context: JobContext | None = None
    ) -> None:
        self.config = config
        groups = queues_by_shard(config, [spec.name for spec in config.queues])
        self.launchers: dict[int, Launcher] = {}
        for index, names in sorted(groups.items()):
            specs = tuple(spec for spec in config.queues if spec.name in names)
            # Periodic jobs: each shard's leader pushes those of its own queues only.
            periodic = config.periodic.select(_on_shard(config, index))
            own = shard_config(config, index).replace(queues=specs, periodic=periodic)
            self.launchers[index] = Launcher(
                own, registry, hosting=Hosting(own_signals=False, job_context=job_context)
            )
        self._codes: dict[int, int] = {}
        self._done = threading.Event()
        self._stopping = False
        self._recycling = False

    def busy(self) -> int:
        """Jobs running in every shard's processors."""
        return sum(launcher.manager.busy() for launcher in self.launchers.values())

    def occupancy(self) -> Busy:
        """Jobs running in every shard's threads and loop slots."""
        parts = [launcher.work.occupancy() for launcher in self.launchers.values()]
        return Busy(sum(p.threads for p in parts), sum(p.async_slots for p in parts))

    @property
    def capacity(self) -> Capacity:
        """Threads and loop slots of every shard's launcher."""
        parts = [launcher.capacity for launcher in self.launchers.values()]
        return Capacity(sum(p.threads for p in parts), sum(p.async_slots for p in parts))

    def saturated(self) -> bool:
        """Whether any shard's threads are saturated (adaptive affinity)."""
        return any(launcher.manager.saturated() for launcher in self.launchers.values())

    def quiet(self) -> bool:
        """Whether every shard's manager is quiet."""
        return all(launcher.manager.quiet for launcher in self.launchers.values())

    def run(self) -> int:
        """Run every shard's launcher until TERM/INT; the highest exit code of theirs."""
        for name in HANDLED_SIGNALS:
            signal.signal(getattr(signal, f"SIG{name}"), self._on_signal)
        for index, launcher in self.launchers.items():
            log.info("shard %d (%s): queues %s", index, safe_url(launcher.config.redis_url),
                     ",".join(q.name for q in launcher.config.queues))
            threading.Thread(
                target=self._run_one, args=(index, launcher), name=f"rfetch-shard-{index}",
                daemon=True,
            ).start()
        while len(self._codes) < len(self.launchers):
            self._done.wait(1.0)
            self._done.clear()
        return max(self._codes.values())

    def _run_one(self, index: int, launcher: Launcher) -> None:
        try:
            code = launcher.run()
        except Exception:
            log.exception("the launcher of shard %d failed", index)
            code = 1
        self._codes[index] = code
        # A recycle (USR1) ends each launcher once its own jobs are done: the others are
        # left to finish theirs, not stopped.
        if len(self._codes) < len(self.launchers) and not (self._stopping or self._recycling):
            self._stopping = True
            log.info("shard %d stopped (exit %d): stopping the others", index, code)
            for other in self.launchers.values():
                other.events.put("TERM")
        self._done.set()

    def _on_signal(self, signum: int, frame: Any) -> None:
        # SimpleQueue.put is reentrant: safe in a signal handler.
        name = signal.Signals(signum).name[3:]
        if name in ("TERM", "INT"):
            self._stopping = True
        elif name == "USR1":
            self._recycling = True
        for launcher in self.launchers.values():
            launcher.events.put(name)


def _on_shard(config: Config, index: int) -> Callable[[Schedule], bool]:
    """Whether a periodic schedule pushes to a queue of shard ``index``."""

    def keep(schedule: Schedule) -> bool:
        return shard_of(config, schedule.queue) == index

    return keep

