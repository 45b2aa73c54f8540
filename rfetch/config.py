"""The one configuration object that every rfetch component receives.

A :class:`Config` is built once (by the CLI, by :func:`rfetch.configure`, or by the
application) and handed to every constructor. Nothing in rfetch reads the environment
except :meth:`Config.from_env`, which is called explicitly, never at import time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rfetch.config_checks import (
    check_cpu_affinity,
    check_limits,
    check_redis,
    check_redis_url,
)
from rfetch.config_env import env_values
from rfetch.errors import ConfigError
from rfetch.jobs.schedule import PeriodicRegistry

if TYPE_CHECKING:
    from rfetch.jobs.middleware import ClientMiddleware, ServerMiddleware

DEFAULT_REDIS_URL = "redis://localhost:6379/0"

ErrorHandler = Callable[[BaseException, dict[str, Any]], None]
"""Called as ``handler(exception, context)``; context holds ``job`` (the payload dict, when
there is one), ``queue`` and ``jid``, or ``context`` (a string naming the internal task)."""

DeathHandler = Callable[[dict[str, Any], BaseException], None]
"""Called as ``handler(job, exception)`` once for every job that dies (Sidekiq's
``death_handlers``)."""


RecoveryHandler = Callable[[dict[str, Any], bool], None]
"""Called as ``on_recovery(job, poison)`` for each job recovered from a dead process;
``poison`` is True when it went to the dead set as a poison pill instead."""


@dataclass(frozen=True)
class QueueSpec:
    """A queue the worker fetches from, with its weight (Sidekiq's ``-q name,weight``)."""

    name: str
    weight: int = 1

    @classmethod
    def parse(cls, text: str) -> QueueSpec:
        """Parse ``"name"`` or ``"name,weight"``.

        Raises:
            ConfigError: empty name, or a weight that is not a positive integer.
        """
        name, _, weight_text = text.partition(",")
        name = name.strip()
        if not name:
            raise ConfigError(f"queue name is empty in {text!r}")
        if not weight_text:
            return cls(name)
        try:
            weight = int(weight_text)
        except ValueError:
            raise ConfigError(
                f"queue weight must be a whole number, got {weight_text!r} in {text!r}"
            ) from None
        if weight < 1:
            raise ConfigError(f"queue weight must be 1 or more, got {weight} in {text!r}")
        return cls(name, weight)


@dataclass
class Config:
    """Settings for clients and workers; times are in seconds unless a name says otherwise.

    Attributes:
        redis_url: Redis URL (``redis://``, ``rediss://`` or ``unix://``), or a Sentinel URL
            ``redis+sentinel://host:26379,host2:26379/mymaster/0`` whose clients follow a
            failover (:mod:`rfetch.store.sentinel`).
        sentinel_password: password of the sentinels themselves, when they have one (the
            master's password goes in the URL).
        min_replicas: replicas that must have a pushed job before a push counts as done
            (Redis ``WAIT``); 0 (the default) does not wait. A push not replicated within
            ``min_replicas_timeout`` stays in the reliable-push buffer (docs/operations.md,
            "Sentinel").
        min_replicas_timeout: seconds a push waits for ``min_replicas`` replicas.
        min_replicas_acks: also wait for ``min_replicas`` replicas after each
            acknowledgement, before the thread takes its next job, so that a failover
            undoes at most one acknowledgement per thread (a duplicate run, never a loss);
            acknowledgements are then not batched with the fetches
            (:mod:`rfetch.worker.ack_replicas`). Needs ``min_replicas``.
        shards: Redis URLs of the shards; when given, each queue lives on one of them and
            ``redis_url`` is not used (:mod:`rfetch.push.shards`). Environment:
            ``RFETCH_SHARDS``, URLs separated by spaces.
        shard_map: queue name -> index in ``shards``; queues not listed go to the shard
            given by a stable hash of their name. Environment: ``RFETCH_SHARD_MAP``,
            ``queue=index`` pairs separated by commas.
        cluster: ``redis_url`` names a node of a Redis Cluster; needs a hash-tag namespace
            such as ``{myapp}`` (:mod:`rfetch.store.cluster`).
        namespace: optional key prefix; every key becomes ``<namespace>:<key>``.
        concurrency: processor threads per worker process (Sidekiq 7 default: 5).
        async_concurrency: async jobs (``async def perform``) a worker process runs at
            once on its event loop thread, beside the threads (default 100).
        queues: queues to fetch from, with weights.
        strict: take queues in the listed order; when ``None``, strict exactly when no
            queue has a weight above 1 (Sidekiq's rule).
        shutdown_timeout: ``-t``; how long TERM waits for running jobs before pushing them
            back to their queues (Sidekiq default 25).
        tag: process tag shown in the heartbeat and the process title.
        labels: extra labels shown in the heartbeat.
        heartbeat_interval: seconds between heartbeats (Sidekiq: 10; rfetch: 5, so that a
            killed process's jobs are back within 60 s, docs/guarantees.md).
        heartbeat_ttl: lifetime of the heartbeat hash, whole seconds; a process whose hash
            has expired is dead (Sidekiq: 60; rfetch: 20, four missed beats).
        poll_interval_average: average seconds between scheduled/retry polls across the whole
            cluster; ``None`` means Sidekiq's ``process count x 5 s``.
        poll_initial_wait: seconds before the first poll (Sidekiq: 10 + rand(5)); ``None``
            means Sidekiq's value.
        max_retries: retries for ``retry=True`` (Sidekiq: 25).
        dead_max_jobs: cap of the dead set (Sidekiq: 10,000).
        dead_timeout: age after which dead jobs are trimmed (Sidekiq: 180 days).
        max_payload_bytes: largest JSON payload a client pushes (default 1 MiB).
        prefetch: the most jobs a worker process may hold in its private lists beyond the
            ones its threads are running; ``None`` means equal to ``concurrency``. How many
            it holds adapts to the jobs' run time (:mod:`rfetch.worker.prefetch`).
        prefetch_horizon: seconds a job fetched ahead may expect to wait for a thread of its
            process: fewer jobs are fetched ahead the longer jobs run, none while every
            thread runs a job older than this, and a job that would wait longer behind
            such threads goes back to its queue for another process (default 0.1).
        block_timeout: seconds a blocking fetch waits before looking at the other queues and
            at shutdown (1-2 s, as the issue asks).
        network_timeout: socket timeout for Redis commands other than blocking fetches.
        error_handlers: called on job failures and internal errors.
        death_handlers: called once per job that dies.
        client_middleware, server_middleware: middleware chains, outermost first.
        backtrace_lines_default: lines kept when a job sets ``backtrace=True``.
        orphan_check_interval: average seconds between checks for dead processes (jittered
            to [0.5x, 1.5x]; default 10); a suspect is looked at again after 2 heartbeat
            intervals.
        orphan_full_scan_interval: seconds between full SCANs for private lists of
            identities rfetch does not know (Sidekiq Pro: hourly).
        poison_max_recoveries: recoveries within ``poison_window`` that make a job a poison
            pill, sent to the dead set (Sidekiq Pro 5.2: 3 in 72 h).
        poison_window: seconds over which recoveries are counted.
        on_recovery: called as ``on_recovery(job, poison)`` for each recovered job.
        push_buffer_size: jobs a client keeps while Redis is unreachable (Sidekiq Pro: 1,000);
            beyond that a push raises BufferFull.
        push_spool: a folder for a durable SQLite spool of those jobs, so they survive a
            restart of the pushing process; None keeps them in memory only.
        push_exit_timeout: seconds the client keeps trying to deliver buffered jobs at
            interpreter exit.
        max_queue_size: queue name -> the most jobs its public list may hold: a push past
            it raises :class:`rfetch.QueueFull` and writes nothing (backpressure;
            docs/flow-control.md). Queues not named have no limit.
        cpu_affinity: where ``rfetch worker`` runs its threads (CPU affinity):
            ``"adaptive"``, the default (one CPU, worker processes of a host spread over
            the CPUs, and every allowed CPU while a probe measures that it gets the process
            clearly more CPU: :mod:`rfetch.worker.adaptive_affinity`), ``"auto"`` (always
            that one CPU), ``"none"`` (the kernel's placement) or a CPU list such as
            ``"2"`` or ``"0-3"``; see :mod:`rfetch.worker.affinity`.
        processes: ``rfetch worker --processes``: worker processes forked and supervised
            by one parent (Sidekiq Enterprise's swarm, :mod:`rfetch.swarm`); 1 runs one
            worker process with no supervisor.
        max_memory: megabytes of resident memory (RSS) past which a supervised child is
            recycled (a fresh child forked; the old one quiet, its running jobs finished
            with no ``-t`` deadline, then exits); None for no limit.
        max_jobs: jobs after which a supervised child is recycled the same way; None for
            no limit.
        job_timeout: seconds a job may run when it sets no ``timeout`` of its own; None for
            no limit (docs/guarantees.md, "Time limits").
        job_timeout_grace: seconds a job may go on past its deadline, or past a cancel
            request, before the worker stops it for real (records it as failed, then
            retires the process).
        leader_ttl: seconds the leader lease lasts without renewal (renewed every third
            of it); a SIGKILLed leader is replaced within it, a stopped one at once. 15 s,
            against Sidekiq Enterprise's 15 s renewals and 60 s follower checks: see
            ``docs/periodic.md``.
        periodic: the periodic (cron) schedules this worker registers
            (``config.periodic.register(...)`` in ``configure_worker``).
    """

    redis_url: str = DEFAULT_REDIS_URL
    sentinel_password: str | None = None
    min_replicas: int = 0
    min_replicas_timeout: float = 1.0
    min_replicas_acks: bool = False
    cluster: bool = False
    shards: Sequence[str] = ()
    shard_map: Mapping[str, int] = field(default_factory=dict)
    namespace: str | None = None
    concurrency: int = 5
    async_concurrency: int = 100
    queues: Sequence[QueueSpec] = (QueueSpec("default"),)
    strict: bool | None = None
    shutdown_timeout: float = 25.0
    tag: str = ""
    labels: Sequence[str] = ()
    heartbeat_interval: float = 5.0
    heartbeat_ttl: int = 20
    poll_interval_average: float | None = None
    poll_initial_wait: float | None = None
    max_retries: int = 25
    dead_max_jobs: int = 10_000
    dead_timeout: float = 180 * 24 * 3600
    max_payload_bytes: int = 1024 * 1024
    prefetch: int | None = None
    prefetch_horizon: float = 0.1
    block_timeout: float = 2.0
    network_timeout: float = 5.0
    error_handlers: list[ErrorHandler] = field(default_factory=list)
    death_handlers: list[DeathHandler] = field(default_factory=list)
    client_middleware: list[ClientMiddleware] = field(default_factory=list)
    server_middleware: list[ServerMiddleware] = field(default_factory=list)
    backtrace_lines_default: int = 1000
    orphan_check_interval: float = 10.0
    orphan_full_scan_interval: float = 3600.0
    poison_max_recoveries: int = 3
    poison_window: float = 72 * 3600
    on_recovery: RecoveryHandler | None = None
    push_buffer_size: int = 1000
    push_spool: str | None = None
    push_exit_timeout: float = 10.0
    max_queue_size: Mapping[str, int] = field(default_factory=dict)
    cpu_affinity: str = "adaptive"
    processes: int = 1
    max_memory: int | None = None
    max_jobs: int | None = None
    job_timeout: float | None = None
    job_timeout_grace: float = 5.0
    leader_ttl: float = 15.0
    periodic: PeriodicRegistry = field(default_factory=PeriodicRegistry)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every field.

        Raises:
            ConfigError: naming the first field that is out of range.
        """
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be 1 or more, got {self.concurrency}")
        if self.async_concurrency < 1:
            raise ConfigError(
                f"async_concurrency must be 1 or more, got {self.async_concurrency}"
            )
        if not self.queues:
            raise ConfigError("at least one queue is needed")
        names = [q.name for q in self.queues]
        if len(set(names)) != len(names):
            raise ConfigError(f"a queue is listed twice: {names}")
        if self.shutdown_timeout < 0:
            raise ConfigError("shutdown timeout must not be negative")
        if self.heartbeat_interval <= 0 or self.heartbeat_ttl <= self.heartbeat_interval:
            raise ConfigError("heartbeat TTL must be longer than the heartbeat interval")
        if self.max_retries < 0 or self.dead_max_jobs < 0:
            raise ConfigError("max_retries and dead_max_jobs must not be negative")
        if self.max_payload_bytes < 64:
            raise ConfigError("max_payload_bytes must be at least 64")
        if self.orphan_check_interval <= 0 or self.orphan_full_scan_interval <= 0:
            raise ConfigError("orphan check intervals must be positive")
        if self.poison_max_recoveries < 1 or self.poison_window <= 0:
            raise ConfigError("poison_max_recoveries must be >= 1 and poison_window positive")
        if self.push_buffer_size < 1 or self.push_exit_timeout < 0:
            raise ConfigError("push_buffer_size must be >= 1 and push_exit_timeout >= 0")
        if self.prefetch is not None and self.prefetch < 0:
            raise ConfigError("prefetch must not be negative")
        if self.prefetch_horizon <= 0:
            raise ConfigError("prefetch_horizon must be positive (seconds)")
        if not 0 < self.block_timeout < self.network_timeout:
            raise ConfigError("block_timeout must be positive and below network_timeout")
        check_cpu_affinity(self.cpu_affinity)
        check_redis_url(self.redis_url)
        check_limits(
            max_queue_size=self.max_queue_size, processes=self.processes,
            max_memory=self.max_memory, max_jobs=self.max_jobs,
            job_timeout=self.job_timeout, job_timeout_grace=self.job_timeout_grace,
        )
        check_redis(
            self.redis_url, cluster=self.cluster, namespace=self.namespace,
            min_replicas=self.min_replicas, min_replicas_timeout=self.min_replicas_timeout,
            min_replicas_acks=self.min_replicas_acks, shards=self.shards,
            shard_map=self.shard_map, processes=self.processes,
        )
        if not self.leader_ttl >= 1:
            raise ConfigError(f"leader_ttl must be at least 1 second, got {self.leader_ttl}")
        if self.namespace is not None and (not self.namespace or ":" in self.namespace):
            raise ConfigError(
                f"namespace must be a non-empty name without ':', got {self.namespace!r}"
            )

    @property
    def is_strict(self) -> bool:
        """Whether queues are taken in strict listed order."""
        if self.strict is not None:
            return self.strict
        return all(q.weight == 1 for q in self.queues)

    @property
    def prefetch_count(self) -> int:
        """Jobs held beyond the running ones (``prefetch``, default ``concurrency``)."""
        return self.concurrency if self.prefetch is None else self.prefetch

    def replace(self, **changes: Any) -> Config:
        """A copy with some fields changed (validated)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Config:
        """Build a Config from the environment, then ``overrides`` (None values ignored).

        Reads ``REDIS_URL``, and ``RFETCH_<FIELD>`` for every number, text or flag field
        (e.g. ``RFETCH_NAMESPACE``, ``RFETCH_HEARTBEAT_INTERVAL``,
        ``RFETCH_POLL_INTERVAL_AVERAGE``, ``RFETCH_MAX_RETRIES``).

        Args:
            environ: the mapping to read (default ``os.environ``).
            overrides: any Config field.

        Raises:
            ConfigError: a variable that does not parse as its field's type.
        """
        env = os.environ if environ is None else environ
        values = env_values(env, DEFAULT_REDIS_URL)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
