"""``rfetch worker``: boot a worker process, or a swarm of them (``--processes``).

With :mod:`.worker_launch` (one worker process's launch), the only CLI code that imports
the worker's side (launcher, registry, CPU affinity, per-process metrics, the swarm); every
other command reads or steers through ``rfetch.api``.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import click

from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError, RfetchError
from rfetch.integrations.sentry import SentrySettings
from rfetch.log_context import PRINT_LOGGER, JobContext, PrintToLog
from rfetch.logs import setup_direct_logging, setup_logging
from rfetch.shards import shard_config
from rfetch.store.connection import connect
from rfetch.swarm.channel import Supervision
from rfetch.swarm.cpus import parse_processes

from .app import main
from .options import NAMESPACE_HELP, REDIS_URL_HELP
from .worker_launch import Boot, launch

if TYPE_CHECKING:
    from rfetch.swarm.runtime import ChildSpec
    from rfetch.worker.registry import Registry


def _processes(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_processes(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _queue_specs(values: tuple[str, ...]) -> list[QueueSpec]:
    try:
        return [QueueSpec.parse(v) for v in values] or [QueueSpec("default")]
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="-q") from None


@dataclass(frozen=True)
class _Options:
    """The options of ``rfetch worker``, named as its click parameters."""

    queues: tuple[str, ...]
    concurrency: int | None
    async_concurrency: int | None
    requires: tuple[str, ...]
    timeout: float | None
    tag: str | None
    redis_url: str | None
    namespace: str | None
    strict: bool | None
    prefetch: int | None
    prefetch_horizon: float | None
    labels: tuple[str, ...]
    cpu_affinity: str | None
    verbose: bool
    json_logs: bool
    sentry_dsn: str | None
    sentry_traces_sample_rate: float | None
    sentry_crons: bool
    metrics_port: int | None
    metrics_bind: str
    processes: int | None
    max_memory: int | None
    max_jobs: int | None
    job_timeout: float | None
    job_timeout_grace: float | None
    min_replicas: int | None
    min_replicas_acks: bool | None

    def config(self) -> Config:
        """The Config: ``RFETCH_<FIELD>`` variables, overridden by the options given.

        Raises:
            click.BadParameter: a malformed ``-q``.
            ConfigError: a variable or an option Config refuses.
        """
        return Config.from_env(
            redis_url=self.redis_url,
            namespace=self.namespace,
            concurrency=self.concurrency,
            async_concurrency=self.async_concurrency,
            queues=_queue_specs(self.queues),
            strict=self.strict,
            shutdown_timeout=self.timeout,
            tag=self.tag,
            labels=tuple(self.labels),
            prefetch=self.prefetch,
            prefetch_horizon=self.prefetch_horizon,
            cpu_affinity=self.cpu_affinity,
            processes=self.processes,
            max_memory=self.max_memory,
            max_jobs=self.max_jobs,
            job_timeout=self.job_timeout,
            job_timeout_grace=self.job_timeout_grace,
            min_replicas=self.min_replicas,
            min_replicas_acks=self.min_replicas_acks,
        )

    def supervises(self) -> bool:
        """Whether this process forks workers and supervises them (a swarm's parent).

        As PID 1 (a container) a worker always supervises itself, to reap zombies.
        """
        return (
            self.processes is not None
            or bool(os.environ.get("RFETCH_PROCESSES"))
            or os.getpid() == 1
        )




@main.command()
@click.option(
    "-q",
    "--queue",
    "queues",
    multiple=True,
    metavar="NAME[,WEIGHT]",
    help="Queue to process, with an optional weight; repeat for more. Weighted random "
    "order if any weight is given, else strict order. A queue no registered job class "
    "uses is warned about at start (not refused: another client may feed it). "
    "[default: default]",
)
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=None,
              help="Processor threads. [default: 5]")
@click.option("--async-concurrency", type=click.IntRange(min=1), default=None,
              help="Async jobs (async def perform) run at once on the event loop thread, "
              "beside the threads. [default: 100]")
@click.option("-r", "--require", "requires", multiple=True, metavar="MODULE_OR_FILE",
              help="Module path (myapp.jobs) or file (./jobs.py) defining the jobs; repeatable. "
              "One that raises on import stops the worker (exit 1, -v for the traceback); one "
              "that loads no job class (and defines no configure_worker) is warned about.")
@click.option("-t", "--timeout", type=click.FloatRange(min=0), default=None,
              help="Seconds TERM waits for running jobs before pushing them back. [default: 25]")
@click.option("-g", "--tag", default=None, help="Tag shown in the process title and heartbeat.")
@click.option("--redis-url", envvar="REDIS_URL", default=None, help=REDIS_URL_HELP)
@click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None,
              help=NAMESPACE_HELP)
@click.option("--strict/--no-strict", default=None,
              help="Force strict queue order (ignoring weights) or weighted random order.")
@click.option("--prefetch", type=click.IntRange(min=0), default=None,
              help="Most jobs held beyond the running ones. [default: concurrency]")
@click.option("--prefetch-horizon", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds a job fetched ahead may expect to wait for a thread; jobs "
              "waiting behind longer-running ones go back to the queue. [default: 0.1]")
@click.option("--label", "labels", multiple=True, help="Label shown in the heartbeat.")
@click.option("--cpu-affinity", default=None, metavar="adaptive|auto|none|CPUS",
              help="'adaptive' (the default): start on one CPU (worker processes of a host "
              "spread over the CPUs), where a GIL hand-off is cheap, and spread over every "
              "CPU while a one-second probe shows that gets the process more CPU (C code "
              "that releases the GIL, subprocesses); 'auto': always on that one CPU; "
              "'none': the kernel's placement; or the CPUs listed ('2', '0-3'). "
              "Default RFETCH_CPU_AFFINITY, else adaptive.")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@click.option("--json-logs", is_flag=True, help="One JSON object per log line.")
@click.option("--sentry-dsn", envvar="SENTRY_DSN", default=None, metavar="DSN",
              help="Send job failures, internal errors, job runs' transactions and periodic "
              "jobs' check-ins to Sentry (needs the sentry extra) [env: SENTRY_DSN].")
@click.option("--sentry-traces-sample-rate", type=click.FloatRange(0.0, 1.0), default=None,
              metavar="RATE", help="With --sentry-dsn: the share of job runs sent to Sentry "
              "as performance transactions (0.0-1.0). [default: none]")
@click.option("--sentry-crons/--no-sentry-crons", default=True, show_default=True,
              help="With --sentry-dsn: Sentry Crons check-ins for periodic jobs.")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="Serve this process's Prometheus metrics on PORT (needs the web extra).")
@click.option("--metrics-bind", default="127.0.0.1", show_default=True, metavar="HOST",
              help="Address of the --metrics-port server (0.0.0.0: every interface).")
@click.option("--processes", callback=_processes, default=None, metavar="N|auto",
              help="Fork N worker processes under one supervising parent (a swarm; 'auto': "
              "the CPUs this process may use). Not given (nor RFETCH_PROCESSES): one "
              "process, no supervisor, except as PID 1.")
@click.option("--max-memory", type=click.IntRange(min=1), default=None, metavar="MB",
              help="Swarm: recycle a worker past this resident memory: a new one starts, "
              "the old one goes quiet, finishes its running jobs (no -t deadline, none "
              "runs twice) and exits.")
@click.option("--max-jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Swarm: recycle a worker after this many jobs (as --max-memory).")
@click.option("--job-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS", help="Time limit of jobs that set no timeout of their own.")
@click.option("--job-timeout-grace", type=click.FloatRange(min=0), default=None,
              metavar="SECONDS", help="How long a job may overrun its limit (or a cancel) "
              "before it is recorded as failed and its process retires. [default: 5]")
@click.option("--min-replicas", type=click.IntRange(min=0), default=None, metavar="N",
              help="Replicas that must have what this worker pushes (periodic jobs) and, "
              "with --min-replicas-acks, its acknowledgements (Config.min_replicas). "
              "[default: 0]")
@click.option("--min-replicas-acks/--no-min-replicas-acks", default=None,
              help="Also wait for --min-replicas replicas after each acknowledgement, so "
              "a failover re-runs at most one finished job per thread. [default: off]")
def worker(**options: Any) -> None:
    """Run a worker process, or a swarm of them (--processes).

    Settings not given as options are read from RFETCH_<FIELD> environment variables
    (e.g. RFETCH_HEARTBEAT_INTERVAL, RFETCH_POLL_INTERVAL_AVERAGE; see docs/configuration.md).

    \b
    Signals: TSTP = quiet (stop fetching, finish running jobs);
    TERM/INT = quiet, wait up to -t seconds, push unfinished jobs back, exit 0
    (a second TERM/INT stops at once); USR1 = recycle: quiet, finish running
    jobs (no deadline), exit 0; TTIN = log every thread's stack.
    To a swarm's parent, the same for every worker, and USR2 = rolling restart
    (every worker recycled, one at a time).
    """
    _start(_Options(**options))


def _start(options: _Options) -> NoReturn:
    """Check the settings, load the jobs, and run one worker process or a swarm's parent;
    exits with its code."""
    # A swarm's parent forks: it must run no thread then (no log writer thread). Logging is
    # direct (no thread) until then, so what the -r imports log is written too; each worker
    # process then starts its own writer (_run_process).
    supervise = options.supervises()
    setup_direct_logging(options.verbose, options.json_logs)
    boot = _prepare(options)
    sys.exit(_run_swarm(boot) if supervise else _run_process(boot))


def _prepare(options: _Options) -> Boot:
    """Build the Config, check it reaches Redis, and load the jobs (logging is direct).

    Raises:
        click.ClickException: an :class:`RfetchError` on the way (its cause logged with -v).
    """
    try:
        config = options.config()
        _check_connections(config)
        registry = _load_jobs(options.requires, config)
    except RfetchError as exc:
        if options.verbose and exc.__cause__ is not None:
            logging.getLogger("rfetch.cli").debug("the cause", exc_info=exc.__cause__)
        raise click.ClickException(str(exc)) from None
    sentry = SentrySettings(
        options.sentry_dsn, options.sentry_traces_sample_rate, options.sentry_crons
    )
    return Boot(
        config, registry, options.verbose, options.json_logs, sentry,
        options.metrics_port, options.metrics_bind,
    )


def _check_connections(config: Config) -> None:
    """Connect once to Redis (each shard's), so that a bad Sentinel setting is an error now,
    not a back-off loop in every thread.

    Raises:
        ConfigError: as :func:`rfetch.store.connection.connect` (a malformed Sentinel URL,
            a master the sentinels do not know).
        RedisUnavailable: no sentinel of a Sentinel URL answered.
    """
    for one in [shard_config(config, i) for i in range(len(config.shards))] or [config]:
        connect(one, max_connections=1).close()


def _load_jobs(requires: tuple[str, ...], config: Config) -> Registry:
    """Import the ``-r`` targets, call their ``configure_worker``, and build the registry,
    the periodic schedules of its classes, and the warning about a ``-q`` no class uses.

    Raises:
        RfetchError: as :func:`rfetch.worker.registry.require_all`, a bad Config, a bad
            periodic schedule.
    """
    from rfetch.worker.queue_check import warn_unused_queues
    from rfetch.worker.registry import Registry, configure_from, require_all

    configure_from(require_all(requires), config)
    registry = Registry.from_loaded()
    classes = [c for c in map(registry.get, registry.names()) if c is not None]
    config.periodic.collect(classes)
    config.periodic.check_jobs(registry.names())
    warn_unused_queues([q.name for q in config.queues], classes)
    return registry


def _run_swarm(boot: Boot) -> int:
    """The swarm's parent: fork ``config.processes`` workers and supervise them."""
    from rfetch.swarm.recover import ParentRecovery
    from rfetch.swarm.runtime import run_swarm

    swarm = f"{socket.gethostname()}:{os.getpid()}"

    def child(spec: ChildSpec) -> int:
        supervision = Supervision(spec.status, spec.parent_pid, spec.slot, swarm)
        return _run_process(boot, spec.identity, supervision)

    return run_swarm(boot.config, child, recover=ParentRecovery(boot.config))


def _run_process(
    boot: Boot, identity: str | None = None, supervision: Supervision | None = None
) -> int:
    """One worker process (on its own, or a swarm's child after the fork); its exit code.

    Its log writer takes rfetch's lines and the application's (logging, and ``print``
    through :class:`PrintToLog`), with the running job's jid and class (:class:`JobContext`);
    ``sys.stdout`` is put back and the writer flushed however the process ends; what is
    logged after that is written directly.
    """
    job_context = JobContext()
    listener = setup_logging(boot.verbose, boot.json_logs, job_context)
    stdout = sys.stdout
    sys.stdout = PrintToLog(logging.getLogger(PRINT_LOGGER), stdout)
    try:
        return launch(boot, job_context, identity, supervision)
    finally:
        sys.stdout.flush()
        sys.stdout = stdout
        listener.stop()
        # Lines logged later (atexit: reliable push's undelivered jobs) are written directly.
        setup_direct_logging(boot.verbose, boot.json_logs)
