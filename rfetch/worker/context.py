"""The worker context: what nearly every part of a worker process shares (Sidekiq's
``Component``: config, Redis, logger, error handling, identity), built once by the launcher
and handed to each part's constructor with at most a few collaborators of its own."""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from rfetch.config import Config
from rfetch.observability.log_context import JobContext
from rfetch.observability.stats import Stats
from rfetch.store.commands import Commands
from rfetch.store.keys import Keys
from rfetch.worker.reporting import ErrorReporter
from rfetch.worker.work_state import WorkState


@dataclass(frozen=True, slots=True, eq=False)
class WorkerContext:
    """The shared parts of one worker process (immutable; the parts themselves are
    thread-safe).

    Attributes:
        config: the settings.
        redis: the process's client (no automatic retries, see
            :func:`rfetch.store.connection.connect`).
        keys: key names of the namespace.
        commands: the Lua scripts on ``redis``.
        report: the error reporter (``config.error_handlers``).
        stats: processed/failed counters, flushed by the heartbeat.
        identity: the process identity ``host:pid:hex``.
        work: busy threads and loop slots, and the quiet flag.
        job_context: marks the running job on the application's log records.
    """

    config: Config
    redis: Redis
    keys: Keys
    commands: Commands
    report: ErrorReporter
    stats: Stats
    identity: str
    work: WorkState
    job_context: JobContext

    @classmethod
    def build(
        cls, config: Config, redis: Redis, identity: str, job_context: JobContext | None = None
    ) -> WorkerContext:
        """A context on ``redis`` with fresh key names, commands, reporter, counters and
        work state.

        Args:
            config: the settings (``namespace``, ``error_handlers``).
            redis: the client.
            identity: the process identity ``host:pid:hex``.
            job_context: the log context of the running job (default: a new one).
        """
        keys = Keys(config.namespace)
        return cls(
            config, redis, keys, Commands(redis, keys), ErrorReporter(config.error_handlers),
            Stats(keys), identity, WorkState(), job_context or JobContext(),
        )
