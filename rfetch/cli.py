"""The ``rfetch`` command line (click)."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from rfetch import affinity
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


@main.command()
@click.option("--bind", default="127.0.0.1:7433", show_default=True, metavar="HOST:PORT",
              envvar="RFETCH_WEB_BIND",
              help="Address to listen on [env: RFETCH_WEB_BIND]. Only this machine can "
              "connect by default; use 0.0.0.0:PORT to listen on every interface.")
@click.option("--prefix", default="", metavar="PATH", envvar="RFETCH_WEB_PREFIX",
              help="Serve the UI under PATH, e.g. /rfetch behind a proxy "
              "[env: RFETCH_WEB_PREFIX].")
@click.option("--read-only", is_flag=True, envvar="RFETCH_WEB_READ_ONLY",
              help="Show everything, change nothing: actions answer 403 and no button is "
              "shown [env: RFETCH_WEB_READ_ONLY].")
@click.option("--redis-url", envvar="REDIS_URL", default=None, help=REDIS_URL_HELP)
@click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None,
              help="Key prefix (keys become NAMESPACE:queue:...).")
@click.option("--threads", type=click.IntRange(min=1), default=8, show_default=True,
              help="Threads serving requests.")
@click.option("--poll-interval", type=click.FloatRange(min=1), default=5.0, show_default=True,
              metavar="SECONDS", help="Default refresh of the dashboard's live chart.")
@click.option("--metrics-window", type=click.IntRange(1, 120), default=5, show_default=True,
              metavar="MINUTES", help="Minutes of per-class figures in /metrics.")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def web(
    bind: str,
    prefix: str,
    read_only: bool,
    redis_url: str | None,
    namespace: str | None,
    threads: int,
    poll_interval: float,
    metrics_window: int,
    verbose: bool,
) -> None:
    """Serve the web UI and the Prometheus endpoint (/metrics) with waitress.

    Needs the web extra (pip install 'rfetch[web]'). Set RFETCH_WEB_USER and
    RFETCH_WEB_PASSWORD to require HTTP basic auth for every page, action and /metrics.
    Every action is a POST with a CSRF token. Stop with INT or TERM.
    """
    try:
        from rfetch.web import create_app
        from rfetch.web.server import parse_bind, serve
    except ImportError as exc:
        raise click.ClickException(
            f"the web UI needs the web extra (pip install 'rfetch[web]'): {exc}"
        ) from None
    try:
        host, port = parse_bind(bind)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--bind") from None
    listener = setup_logging(verbose, False)
    try:
        config = Config.from_env(redis_url=redis_url, namespace=namespace)
        app = create_app(config, read_only=read_only, prefix=prefix,
                         poll_interval=poll_interval, metrics_window=metrics_window)
    except (RfetchError, ValueError) as exc:
        listener.stop()
        raise click.ClickException(str(exc)) from None
    auth = "basic auth" if app.basic_auth is not None else "no auth"
    mode = "read-only" if read_only else "read-write"

    def ready(urls: str) -> None:
        click.echo(f"rfetch web {__version__} ({mode}, {auth}) on {urls}{app.prefix}/ "
                   f"for {_shown_url(config)}",
                   err=True)

    try:
        serve(app, host, port, threads=threads, on_ready=ready)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {bind}: {exc}") from None
    finally:
        listener.stop()


def _shown_url(config: Config) -> str:
    from rfetch.web.formatting import safe_url

    return safe_url(config.redis_url)


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


# -- admin commands (issue #6): everything goes through rfetch.api -------------------------

if TYPE_CHECKING:
    from rfetch.api import Api, JobRecord, JobSet

EXIT_CHECK_FAILED = 1
"""``rfetch check``: a threshold was crossed (Nagios CRITICAL is 2, but 2 is click's usage
error; monitors should treat any non-zero code as failure)."""

EXIT_UNREACHABLE = 3
"""``rfetch check``: Redis could not be asked (Nagios UNKNOWN)."""


def _connection_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--redis-url``, ``--namespace`` and ``--json``, as ``rfetch enqueue`` takes them."""
    func = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")(func)
    func = click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None,
                        help="Key prefix (keys become NAMESPACE:queue:...).")(func)
    return click.option("--redis-url", envvar="REDIS_URL", default=None,
                        help=REDIS_URL_HELP)(func)


@contextmanager
def _admin(redis_url: str | None, namespace: str | None) -> Iterator[Api]:
    """An Api for the command; Redis errors become a one-line error (exit 1)."""
    from redis.exceptions import RedisError

    from rfetch.api import Api

    try:
        config = Config.from_env(redis_url=redis_url, namespace=namespace)
    except RfetchError as exc:
        raise click.ClickException(str(exc)) from None
    api = Api(config)
    try:
        yield api
    except (RedisError, OSError) as exc:
        raise click.ClickException(f"Redis at {config.redis_url}: {exc}") from None
    finally:
        api.redis.close()


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Plain columns, two spaces apart; the last column is not padded."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        padded = [v.ljust(widths[i]) for i, v in enumerate(row[:-1])] + [row[-1]]
        click.echo("  ".join(padded).rstrip())


def _cell(value: Any, width: int = 60) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


def _when(at: float | None) -> str:
    if at is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


@main.command()
@click.option("--days", type=click.IntRange(min=0), default=0,
              help="Also show processed/failed for this many UTC days, newest first.")
@_connection_options
def stats(days: int, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Processed and failed jobs, queue and set sizes, processes and busy threads."""
    with _admin(redis_url, namespace) as api:
        current = api.stats()
        history = api.history(days) if days else []
    if as_json:
        _echo_json({**current.to_dict(), "history": [d.to_dict() for d in history]})
        return
    _table(
        ["STAT", "VALUE"],
        [
            ("processed", current.processed),
            ("failed", current.failed),
            ("processed today", current.processed_today),
            ("failed today", current.failed_today),
            ("enqueued", current.enqueued),
            ("scheduled", current.scheduled_size),
            ("retries", current.retry_size),
            ("dead", current.dead_size),
            ("processes", current.processes),
            ("busy", current.busy),
        ],
    )
    if history:
        click.echo()
        _table(["DATE (UTC)", "PROCESSED", "FAILED"],
               [(d.date, d.processed, d.failed) for d in history])


@main.command()
@click.option("--pause", "to_pause", multiple=True, metavar="QUEUE",
              help="Pause QUEUE: workers take no job from it until unpaused; repeatable.")
@click.option("--unpause", "to_unpause", multiple=True, metavar="QUEUE",
              help="Unpause QUEUE; repeatable.")
@_connection_options
def queues(
    to_pause: tuple[str, ...],
    to_unpause: tuple[str, ...],
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """List queues with size, latency (seconds the oldest job has waited) and paused flag."""
    with _admin(redis_url, namespace) as api:
        for name in to_pause:
            api.queue(name).pause()
            if not as_json:
                click.echo(f"paused queue {name}")
        for name in to_unpause:
            api.queue(name).unpause()
            if not as_json:
                click.echo(f"unpaused queue {name}")
        found = api.queues()
    if as_json:
        _echo_json([q.to_dict() for q in found])
        return
    _table(["QUEUE", "SIZE", "LATENCY_S", "PAUSED"],
           [(q.name, q.size, f"{q.latency:.1f}", "yes" if q.paused else "no") for q in found])


@main.command()
@click.option("--queue", "queue_name", default=None, help="Only this queue's keys.")
@click.option("--blocked", is_flag=True, help="Only keys blocked by a failed job.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Most keys listed.")
@_connection_options
def keys(
    queue_name: str | None,
    blocked: bool,
    limit: int,
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """Held ordering keys: holder jid, where it is (running, queued, retry = blocked...),
    and jobs waiting behind it. Unblock a key by retrying or deleting its holder."""
    with _admin(redis_url, namespace) as api:
        found = api.blocked_keys(queue_name)[:limit] if blocked else api.ordering_keys(
            queue_name, limit
        )
    if as_json:
        _echo_json([k.to_dict() for k in found])
        return
    _table(["QUEUE", "KEY", "HOLDER", "PLACE", "PENDING"],
           [(k.queue, k.key, k.holder, k.place, k.pending) for k in found])


@main.command()
@click.argument("queue_name", metavar="QUEUE")
@click.option("--weight", nargs=2, type=(str, click.IntRange(1, 1000)), default=None,
              metavar="TENANT N", help="Set TENANT's weight (jobs per turn) to N first.")
@_connection_options
def tenants(
    queue_name: str,
    weight: tuple[str, int] | None,
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """Tenants of a fair queue: backlog, weight and turn in the round robin (0 = next)."""
    with _admin(redis_url, namespace) as api:
        if weight is not None:
            try:
                api.set_tenant_weight(queue_name, weight[0], weight[1])
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--weight") from None
        found = api.tenants(queue_name)
    if as_json:
        _echo_json([t.to_dict() for t in found])
        return
    _table(["TENANT", "BACKLOG", "WEIGHT", "TURN"],
           [(t.tenant, t.backlog, t.weight, t.turn) for t in found])


def _resolve_identity(api: Api, given: str) -> str:
    """An identity from its exact value or a unique prefix (e.g. ``host:pid``)."""
    names = api.processes.identities()
    if given in names:
        return given
    matches = [n for n in names if n.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    problem = "matches several processes" if matches else "is not a known process"
    raise click.BadParameter(f"{given!r} {problem}", param_hint="ID")


@main.command()
@click.option("--quiet", "to_quiet", multiple=True, metavar="ID",
              help="Ask process ID (identity or a unique prefix) to go quiet (TSTP).")
@click.option("--stop", "to_stop", multiple=True, metavar="ID",
              help="Ask process ID to shut down (TERM): finish or push back its jobs.")
@click.option("--cleanup", is_flag=True,
              help="Remove processes whose heartbeat expired from the 'processes' set.")
@click.option("--all", "include_dead", is_flag=True,
              help="Also list processes whose heartbeat has expired.")
@_connection_options
def processes(
    to_quiet: tuple[str, ...],
    to_stop: tuple[str, ...],
    cleanup: bool,
    include_dead: bool,
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """List worker processes (identity, tag, started, RSS, busy/concurrency, quiet)."""
    with _admin(redis_url, namespace) as api:
        quiet = [_resolve_identity(api, i) for i in to_quiet]
        stop = [_resolve_identity(api, i) for i in to_stop]
        for identity in quiet:
            api.processes.quiet(identity)
            if not as_json:
                click.echo(f"asked {identity} to go quiet")
        for identity in stop:
            api.processes.stop(identity)
            if not as_json:
                click.echo(f"asked {identity} to stop")
        if cleanup:
            removed = api.processes.cleanup()
            if not as_json:
                click.echo(f"removed {len(removed)} dead process(es): {' '.join(removed)}")
        found = api.processes.all(include_dead=include_dead)
    if as_json:
        _echo_json([p.to_dict() for p in found])
        return
    _table(
        ["IDENTITY", "TAG", "STARTED (UTC)", "RSS_MB", "BUSY", "QUIET", "ALIVE", "QUEUES"],
        [
            (
                p.identity,
                p.tag,
                _when(p.started_at),
                f"{p.rss_kb / 1024:.1f}",
                f"{p.busy}/{p.concurrency}",
                "yes" if p.quiet else "no",
                "yes" if p.alive else "no",
                ",".join(p.queues),
            )
            for p in found
        ],
    )
    for p in found:
        for job in p.running:
            click.echo(
                f"  {p.identity} thread {job.thread_id}: {job.job.job_class} "
                f"jid={job.job.jid} queue={job.queue} since {_when(job.run_at)}"
            )


def _filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--grep", default=None, metavar="TEXT",
                        help="Substring (any case) of the args' JSON or the error message.")(func)
    return click.option("--class", "job_class", default=None, metavar="NAME",
                        help="Job class (exact, or its last part: SendWelcome).")(func)


SET_COLUMNS = {"schedule": "RUN AT (UTC)", "retry": "NEXT RETRY (UTC)", "dead": "DIED (UTC)"}


def _set_group(command: str, set_name: str, summary: str, actions: dict[str, str]) -> None:
    """Add ``rfetch <command> list|<action>...`` for one sorted set.

    Args:
        command: the command name (``retries``, ``scheduled``, ``dead``).
        set_name: the API's name for the set.
        summary: help text.
        actions: CLI action name -> API action (``retry`` of the scheduled set is
            ``add_to_queue``: run now).
    """

    @main.group(name=command, help=summary)
    def group() -> None:
        pass

    @group.command("list")
    @_filter_options
    @click.option("--sort", type=click.Choice(["time", "retry_count"]), default="time",
                  show_default=True, help="By time (score), or most retried first.")
    @click.option("--reverse", is_flag=True, help="Latest first / fewest retries first.")
    @click.option("--limit", type=click.IntRange(min=1), default=25, show_default=True)
    @click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True)
    @click.option("--max-scan", type=click.IntRange(min=1), default=100_000, show_default=True,
                  help="Most entries a filter or the retry_count sort examines.")
    @_connection_options
    def list_jobs(
        job_class: str | None,
        grep: str | None,
        sort: str,
        reverse: bool,
        limit: int,
        offset: int,
        max_scan: int,
        redis_url: str | None,
        namespace: str | None,
        as_json: bool,
    ) -> None:
        """List jobs, a page at a time."""
        from rfetch.api import JobFilter

        with _admin(redis_url, namespace) as api:
            page = api.job_set(set_name).page(
                offset, limit, sort=sort, reverse=reverse,
                job_filter=JobFilter(job_class, grep), max_scan=max_scan,
            )
        if as_json:
            _echo_json(page.to_dict())
            return
        _table(
            ["JID", "CLASS", "QUEUE", SET_COLUMNS[set_name], "RETRIES", "ERROR", "ARGS"],
            [
                (
                    j.jid, j.job_class, j.queue, _when(j.score), j.retry_count,
                    ": ".join(x for x in (j.error_class, j.error_message) if x) or None,
                    j.display_args,
                )
                for j in page.jobs
            ],
        )
        shown = f"{offset + 1}-{offset + len(page.jobs)}" if page.jobs else "none"
        more = f"; next: --offset {page.next_offset}" if page.next_offset is not None else ""
        click.echo(f"showing {shown} of {page.total} in the set{more}")
        if not page.complete:
            click.echo(f"scan stopped after {page.scanned} entries (--max-scan); "
                       "more may match further on")

    for cli_name, action in actions.items():
        group.command(cli_name, help=_ACTION_HELP[cli_name])(_action_command(set_name, action))


_ACTION_HELP = {
    "retry": "Retry JIDs (or --all-matching jobs) now: push them to their queue.",
    "delete": "Delete JIDs (or --all-matching jobs).",
    "kill": "Move JIDs (or --all-matching jobs) to the dead set.",
}


def _action_command(set_name: str, action: str) -> Callable[..., None]:
    @click.argument("jids", nargs=-1, metavar="[JID]...")
    @_filter_options
    @click.option("--all-matching", is_flag=True,
                  help="Act on every job passing --class/--grep (every job without them).")
    @_connection_options
    def run(
        jids: tuple[str, ...],
        job_class: str | None,
        grep: str | None,
        all_matching: bool,
        redis_url: str | None,
        namespace: str | None,
        as_json: bool,
    ) -> None:
        from rfetch.api import JobFilter

        if all_matching == bool(jids):
            raise click.UsageError("give JIDs, or --all-matching (with --class/--grep)")
        if jids and (job_class or grep):
            raise click.UsageError("--class and --grep go with --all-matching, not with JIDs")
        with _admin(redis_url, namespace) as api:
            job_set = api.job_set(set_name)
            if all_matching:
                result = job_set.apply_matching(action, JobFilter(job_class, grep))
            else:
                records = _find_all(job_set, jids)
                result = job_set.apply(action, records)
        if as_json:
            _echo_json(result.to_dict())
            return
        click.echo(f"{action.replace('_', ' ')}: {result.done} job(s)")
        if result.missing:
            click.echo(f"gone before the action: {' '.join(result.missing)}")
        if result.skipped:
            click.echo(f"skipped (not a valid job): {' '.join(result.skipped)}")

    return run


def _find_all(job_set: JobSet, jids: Sequence[str]) -> list[JobRecord]:
    """The entries of these jids, or a usage error naming those not in the set."""
    found = job_set.find_all(jids)
    seen = {r.jid for r in found.records}
    missing = [j for j in jids if j not in seen]
    if missing:
        raise click.BadParameter(
            f"no job with jid {', '.join(missing)} in the {job_set.name} set", param_hint="JID"
        )
    return found.records


_set_group("retries", "retry", "Failed jobs waiting for their next try.",
           {"retry": "retry", "delete": "delete", "kill": "kill"})
_set_group("scheduled", "schedule", "Jobs scheduled to run later.",
           {"retry": "add_to_queue", "delete": "delete", "kill": "kill"})
_set_group("dead", "dead", "The dead set (morgue).", {"retry": "retry", "delete": "delete"})


@main.command()
@click.argument("jid")
@click.option("--max-scan", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Most entries examined per queue, private list or set.")
@_connection_options
def explain(
    jid: str, max_scan: int, redis_url: str | None, namespace: str | None, as_json: bool
) -> None:
    """Where job JID is and why it is not running. Exits 1 when it is not found."""
    with _admin(redis_url, namespace) as api:
        answer = api.explain(jid, max_scan)
    if as_json:
        _echo_json(answer.to_dict())
    else:
        for line in answer.lines():
            click.echo(line)
    if not answer.found:
        sys.exit(1)


@main.command()
@click.option("--max-latency", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="Fail when a queue's oldest job has waited longer.")
@click.option("--max-size", type=click.IntRange(min=0), default=None, metavar="JOBS",
              help="Fail when a queue holds more jobs.")
@click.option("--queue", default=None, help="Check this queue only (default: all).")
@_connection_options
def check(
    max_latency: float | None,
    max_size: int | None,
    queue: str | None,
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """Monitoring probe: one line, exit 0 (OK), 1 (threshold crossed) or 3 (Redis
    unreachable)."""
    from redis.exceptions import RedisError

    from rfetch.api import Api

    try:
        api = Api(Config.from_env(redis_url=redis_url, namespace=namespace))
    except RfetchError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        result = api.check(max_latency, max_size, queue)
    except (RedisError, OSError) as exc:
        click.echo(f"UNKNOWN cannot read Redis at {api.config.redis_url}: {exc}")
        sys.exit(EXIT_UNREACHABLE)
    finally:
        api.redis.close()
    if as_json:
        _echo_json(result.to_dict())
    else:
        click.echo(result.message)
    sys.exit(0 if result.ok else EXIT_CHECK_FAILED)


if __name__ == "__main__":  # pragma: no cover
    main()
