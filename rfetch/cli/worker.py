"""``rfetch worker``: boot a worker process.

The only module of the CLI that imports the worker's side (launcher, registry, CPU
affinity, per-process metrics); every other command reads or steers through ``rfetch.api``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import click

from rfetch import affinity
from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError, RfetchError
from rfetch.logs import setup_logging

from .app import main
from .options import NAMESPACE_HELP, REDIS_URL_HELP


def _queue_specs(values: tuple[str, ...]) -> list[QueueSpec]:
    try:
        return [QueueSpec.parse(v) for v in values] or [QueueSpec("default")]
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="-q") from None


@main.command()
@click.option(
    "-q",
    "--queue",
    "queues",
    multiple=True,
    metavar="NAME[,WEIGHT]",
    help="Queue to process, with an optional weight; repeat for more. Weighted random "
    "order if any weight is given, else strict order. [default: default]",
)
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=None,
              help="Processor threads. [default: 5]")
@click.option("--async-concurrency", type=click.IntRange(min=1), default=None,
              help="Async jobs (async def perform) run at once on the event loop thread, "
              "beside the threads. [default: 100]")
@click.option("-r", "--require", "requires", multiple=True, metavar="MODULE_OR_FILE",
              help="Module path (myapp.jobs) or file (./jobs.py) defining the jobs; repeatable.")
@click.option("-t", "--timeout", type=click.FloatRange(min=0), default=None,
              help="Seconds TERM waits for running jobs before pushing them back. [default: 25]")
@click.option("-g", "--tag", default=None, help="Tag shown in the process title and heartbeat.")
@click.option("--redis-url", envvar="REDIS_URL", default=None, help=REDIS_URL_HELP)
@click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None,
              help=NAMESPACE_HELP)
@click.option("--strict/--no-strict", default=None,
              help="Force strict queue order (ignoring weights) or weighted random order.")
@click.option("--prefetch", type=click.IntRange(min=0), default=None,
              help="Jobs held beyond the running ones. [default: concurrency]")
@click.option("--label", "labels", multiple=True, help="Label shown in the heartbeat.")
@click.option("--cpu-affinity", default=None, metavar="auto|none|CPUS",
              help="Run every thread on one CPU ('auto', the default: worker processes of a "
              "host spread over the CPUs), leave placement to the kernel ('none', for jobs "
              "whose C code releases the GIL), or on the CPUs listed ('2', '0-3'). "
              "Default RFETCH_CPU_AFFINITY, else auto.")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@click.option("--json-logs", is_flag=True, help="One JSON object per log line.")
@click.option("--sentry-dsn", envvar="SENTRY_DSN", default=None, metavar="DSN",
              help="Report job failures and internal errors to Sentry (needs the sentry "
              "extra) [env: SENTRY_DSN].")
@click.option("--metrics-port", type=click.IntRange(0, 65535), default=None, metavar="PORT",
              help="Serve this process's Prometheus metrics on PORT (needs the web extra).")
@click.option("--metrics-bind", default="127.0.0.1", show_default=True, metavar="HOST",
              help="Address of the --metrics-port server (0.0.0.0: every interface).")
def worker(
    queues: tuple[str, ...],
    concurrency: int | None,
    async_concurrency: int | None,
    requires: tuple[str, ...],
    timeout: float | None,
    tag: str | None,
    redis_url: str | None,
    namespace: str | None,
    strict: bool | None,
    prefetch: int | None,
    labels: tuple[str, ...],
    cpu_affinity: str | None,
    verbose: bool,
    json_logs: bool,
    sentry_dsn: str | None,
    metrics_port: int | None,
    metrics_bind: str,
) -> None:
    """Run a worker process.

    Settings not given as options are read from RFETCH_<FIELD> environment variables
    (e.g. RFETCH_HEARTBEAT_INTERVAL, RFETCH_POLL_INTERVAL_AVERAGE; see docs/configuration.md).

    \b
    Signals: TSTP = quiet (stop fetching, finish running jobs);
    TERM/INT = quiet, wait up to -t seconds, push unfinished jobs back, exit 0
    (a second TERM/INT stops at once); TTIN = log every thread's stack.
    """
    from rfetch.integrations import sentry
    from rfetch.worker.launcher import Launcher
    from rfetch.worker.registry import Registry, configure_from, require

    listener = setup_logging(verbose, json_logs)
    try:
        config = Config.from_env(
            redis_url=redis_url,
            namespace=namespace,
            concurrency=concurrency,
            async_concurrency=async_concurrency,
            queues=_queue_specs(queues),
            strict=strict,
            shutdown_timeout=timeout,
            tag=tag,
            labels=tuple(labels),
            prefetch=prefetch,
            cpu_affinity=cpu_affinity,
        )
        modules = [require(target) for target in requires]
        configure_from(modules, config)
        registry = Registry.from_loaded()
        # After -r: a client the application's own modules initialised is kept.
        if sentry.install(config, dsn=sentry_dsn):
            click.echo("reporting errors to Sentry", err=True)
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    if not requires:
        click.echo("warning: no -r given, so no job classes are registered", err=True)
    try:
        placement = affinity.apply(config.cpu_affinity)
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    logging.getLogger("rfetch.affinity").info(
        "cpu affinity: %s (%s)", affinity.format_cpus(placement.cpus) or "-", placement.how
    )
    metrics = _worker_metrics(config) if metrics_port is not None else None
    try:
        launcher = Launcher(config, registry)
        if metrics is not None and metrics_port is not None:
            manager = launcher.manager
            metrics.watch(lambda: (manager.busy(), config.concurrency, manager.quiet))
            try:
                metrics.serve(metrics_port, metrics_bind)
            except OSError as exc:
                raise click.ClickException(
                    f"cannot serve metrics on {metrics_bind}:{metrics_port}: {exc}"
                ) from None
        code = launcher.run()
    finally:
        listener.stop()
    sys.exit(code)


def _worker_metrics(config: Config) -> Any:
    """A :class:`rfetch.metrics.WorkerMetrics` whose middleware times every job."""
    try:
        from rfetch.metrics import WorkerMetrics
    except ImportError as exc:
        raise click.ClickException(
            f"--metrics-port needs prometheus-client (pip install 'rfetch[web]'): {exc}"
        ) from None
    metrics = WorkerMetrics()
    config.server_middleware.append(metrics.middleware)
    return metrics
