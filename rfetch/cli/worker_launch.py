"""One worker process of ``rfetch worker``, logging in place: its Sentry client, CPU
affinity and per-process metrics server, then its Launcher (one per shard with
``Config.shards``). With :mod:`rfetch.cli.worker`, the only CLI code that imports the
worker's side.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from rfetch.config import Config
from rfetch.errors import RfetchError
from rfetch.integrations.sentry import SentrySettings
from rfetch.observability.log_context import JobContext
from rfetch.swarm.channel import Supervision
from rfetch.worker import adaptive_affinity, affinity
from rfetch.worker.launcher import Hosting, Launcher
from rfetch.worker.shards import ShardedLauncher

if TYPE_CHECKING:
    from rfetch.worker.registry import Registry


@dataclass(frozen=True)
class Boot:
    """What every worker process of ``rfetch worker`` starts from (the parent's, in a swarm)."""

    config: Config
    registry: Registry
    verbose: bool
    json_logs: bool
    sentry: SentrySettings
    metrics_port: int | None
    metrics_bind: str


def launch(
    boot: Boot, job_context: JobContext, identity: str | None, supervision: Supervision | None
) -> int:
    """Build and run the Launcher of one worker process (logging is in place)."""
    config, registry = boot.config, boot.registry
    try:
        # After -r: a client the application's own modules initialised is kept.
        if boot.sentry.install(config) and supervision is None:
            click.echo("reporting errors to Sentry", err=True)
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        placement = affinity.apply(config.cpu_affinity)
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    logging.getLogger("rfetch.affinity").info(
        "cpu affinity: %s (%s)", affinity.format_cpus(placement.cpus) or "-", placement.how
    )
    metrics = _worker_metrics(config) if boot.metrics_port is not None else None
    # In a swarm, worker i serves its metrics on the port + i.
    metrics_port = None if boot.metrics_port is None else boot.metrics_port + (
        supervision.slot if supervision is not None else 0
    )
    metrics_bind = boot.metrics_bind
    if config.shards:  # one launcher per shard in this process (rfetch.worker.shards)
        return _run_shards(
            config, registry, metrics, metrics_port, metrics_bind, job_context, placement
        )
    launcher = Launcher(
        config, registry, identity=identity,
        hosting=Hosting(supervision=supervision, job_context=job_context),
    )
    if placement.adaptive:
        adaptive_affinity.start(placement, launcher.manager.saturated, launcher.report)
    if metrics is not None and metrics_port is not None:
        from rfetch.observability.process_metrics import WorkerFigures  # the web extra

        metrics.watch(lambda: WorkerFigures(
            launcher.work.occupancy(), launcher.capacity, launcher.manager.quiet))
        try:
            metrics.serve(metrics_port, metrics_bind)
        except OSError as exc:
            raise click.ClickException(
                f"cannot serve metrics on {metrics_bind}:{metrics_port}: {exc}"
            ) from None
    return launcher.run()


def _run_shards(
    config: Config,
    registry: Registry,
    metrics: Any,
    port: int | None,
    bind: str,
    job_context: JobContext,
    placement: affinity.Placement,
) -> int:
    """A worker over several shards; its exit code."""
    sharded = ShardedLauncher(config, registry, job_context)
    if placement.adaptive:
        adaptive_affinity.start(placement, sharded.saturated)
    if metrics is not None and port is not None:
        from rfetch.observability.process_metrics import WorkerFigures  # the web extra

        capacity = sharded.capacity
        metrics.watch(lambda: WorkerFigures(sharded.occupancy(), capacity, sharded.quiet()))
        try:
            metrics.serve(port, bind)
        except OSError as exc:
            raise click.ClickException(f"cannot serve metrics on {bind}:{port}: {exc}") from None
    return sharded.run()


def _worker_metrics(config: Config) -> Any:
    """A :class:`rfetch.observability.metrics.WorkerMetrics` whose middleware times every job."""
    try:
        from rfetch.observability.metrics import WorkerMetrics
    except ImportError as exc:
        raise click.ClickException(
            f"--metrics-port needs prometheus-client (pip install 'rfetch[web]'): {exc}"
        ) from None
    metrics = WorkerMetrics()
    config.server_middleware.append(metrics.middleware)
    config.error_handlers.append(metrics.error_handler)
    return metrics
