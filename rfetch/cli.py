"""The ``rfetch`` command line (click)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError, RfetchError
from rfetch.logs import setup_logging
from rfetch.version import __version__

REDIS_URL_HELP = "Redis URL [env: REDIS_URL; default redis://localhost:6379/0]."


def _queue_specs(values: tuple[str, ...]) -> list[QueueSpec]:
    try:
        return [QueueSpec.parse(v) for v in values] or [QueueSpec("default")]
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="-q") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rfetch")
def main() -> None:
    """rfetch: reliable background jobs on Redis, with Sidekiq's data model."""


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
@click.option("-r", "--require", "requires", multiple=True, metavar="MODULE_OR_FILE",
              help="Module path (myapp.jobs) or file (./jobs.py) defining the jobs; repeatable.")
@click.option("-t", "--timeout", type=click.FloatRange(min=0), default=None,
              help="Seconds TERM waits for running jobs before pushing them back. [default: 25]")
@click.option("-g", "--tag", default=None, help="Tag shown in the process title and heartbeat.")
@click.option("--redis-url", envvar="REDIS_URL", default=None, help=REDIS_URL_HELP)
@click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None,
              help="Key prefix (keys become NAMESPACE:queue:...).")
@click.option("--strict/--no-strict", default=None,
              help="Force strict queue order (ignoring weights) or weighted random order.")
@click.option("--prefetch", type=click.IntRange(min=0), default=None,
              help="Jobs held beyond the running ones. [default: concurrency]")
@click.option("--label", "labels", multiple=True, help="Label shown in the heartbeat.")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@click.option("--json-logs", is_flag=True, help="One JSON object per log line.")
@click.option("--sentry-dsn", envvar="SENTRY_DSN", default=None, metavar="DSN",
              help="Report job failures and internal errors to Sentry (needs the sentry "
              "extra) [env: SENTRY_DSN].")
def worker(
    queues: tuple[str, ...],
    concurrency: int | None,
    requires: tuple[str, ...],
    timeout: float | None,
    tag: str | None,
    redis_url: str | None,
    namespace: str | None,
    strict: bool | None,
    prefetch: int | None,
    labels: tuple[str, ...],
    verbose: bool,
    json_logs: bool,
    sentry_dsn: str | None,
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
    from rfetch.launcher import Launcher
    from rfetch.registry import Registry, configure_from, require

    listener = setup_logging(verbose, json_logs)
    try:
        config = Config.from_env(
            redis_url=redis_url,
            namespace=namespace,
            concurrency=concurrency,
            queues=_queue_specs(queues),
            strict=strict,
            shutdown_timeout=timeout,
            tag=tag,
            labels=tuple(labels),
            prefetch=prefetch,
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
        code = Launcher(config, registry).run()
    finally:
        listener.stop()
    sys.exit(code)


@main.command()
@click.argument("name")
@click.argument("json_args", default="[]")
@click.option("-q", "--queue", default="default", show_default=True)
@click.option("--retry", type=int, default=None, help="Retries (default: 25).")
@click.option("--in", "delay", type=float, default=None, help="Run after this many seconds.")
@click.option("--redis-url", envvar="REDIS_URL", default=None, help=REDIS_URL_HELP)
@click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None)
def enqueue(
    name: str,
    json_args: str,
    queue: str,
    retry: int | None,
    delay: float | None,
    redis_url: str | None,
    namespace: str | None,
) -> None:
    """Push one job named NAME with JSON_ARGS (a JSON array); prints the jid."""
    import time

    from rfetch.client import Client

    try:
        args: Any = json.loads(json_args)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="JSON_ARGS") from None
    if not isinstance(args, list):
        raise click.BadParameter("must be a JSON array, e.g. '[1, \"a\"]'", param_hint="JSON_ARGS")
    options: dict[str, Any] = {"queue": queue}
    if retry is not None:
        options["retry"] = retry
    try:
        client = Client(Config.from_env(redis_url=redis_url, namespace=namespace))
        jid = client.push(name, args, options, at=None if delay is None else time.time() + delay)
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(jid or "(dropped by client middleware)")


if __name__ == "__main__":  # pragma: no cover
    main()
