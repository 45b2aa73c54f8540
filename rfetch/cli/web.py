"""``rfetch web``: serve the web UI and ``/metrics`` with waitress."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import click

from rfetch.config import Config
from rfetch.errors import RfetchError
from rfetch.formatting import safe_url
from rfetch.logs import setup_logging
from rfetch.version import __version__

from .app import main
from .options import NAMESPACE_HELP, REDIS_URL_HELP

if TYPE_CHECKING:
    from rfetch.web import BasicAuth, WebApp


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
              help=NAMESPACE_HELP)
@click.option("--threads", type=click.IntRange(min=1), default=8, show_default=True,
              help="Threads serving requests.")
@click.option("--poll-interval", type=click.FloatRange(min=1), default=5.0, show_default=True,
              metavar="SECONDS", help="Default refresh of the dashboard's live chart.")
@click.option("--metrics-window", type=click.IntRange(1, 120), default=5, show_default=True,
              metavar="MINUTES", help="Minutes of per-class figures in /metrics.")
@click.option("--trusted-origin", "trusted_origins", multiple=True, metavar="ORIGIN",
              envvar="RFETCH_WEB_TRUSTED_ORIGINS",
              help="An origin (https://admin.example.com, or https://*.example.com) whose "
              "forms may post actions although it is another site; repeatable "
              "[env: RFETCH_WEB_TRUSTED_ORIGINS, space-separated].")
@click.option("--outbox-database", envvar="RFETCH_OUTBOX_DATABASE", default=None,
              metavar="URL", help="The transactional outbox's database: the dashboard and "
              "/metrics show its backlog [env: RFETCH_OUTBOX_DATABASE].")
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
    trusted_origins: tuple[str, ...],
    outbox_database: str | None,
    verbose: bool,
) -> None:
    """Serve the web UI and the Prometheus endpoint (/metrics) with waitress.

    Needs the web extra (pip install 'rfetch[web]'). Set RFETCH_WEB_USER and
    RFETCH_WEB_PASSWORD to require HTTP basic auth for every page, action and /metrics.
    Every action is a POST from the UI's own origin with a CSRF token signed with
    RFETCH_WEB_SECRET_KEY (at least 16 characters; unset, a key drawn at start: tokens then
    end with the process, so give every web process of a deployment the same key). With
    RFETCH_SHARDS, one merged view of every shard (each row names its shard). Stop with INT
    or TERM.
    """
    _require_web_extra()
    from rfetch.web import create_app
    from rfetch.web.server import serve

    host, port = _host_port(bind)
    listener = setup_logging(verbose, False)
    try:
        config = Config.from_env(redis_url=redis_url, namespace=namespace)
        credentials, exposed = _credentials(host)
        app = create_app(config, read_only=read_only, prefix=prefix,
                         basic_auth=credentials or False, poll_interval=poll_interval,
                         metrics_window=metrics_window, open_warning=exposed,
                         trusted_origins=trusted_origins, outbox_database=outbox_database)
    except (RfetchError, ValueError) as exc:
        listener.stop()
        raise click.ClickException(str(exc)) from None
    if exposed:
        _warn_open(bind, read_only)

    def ready(urls: str) -> None:
        click.echo(_banner(app, config, urls), err=True)

    try:
        serve(app, host, port, threads=threads, on_ready=ready)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {bind}: {exc}") from None
    finally:
        listener.stop()


def _require_web_extra() -> None:
    """Check that the web UI's modules import.

    Raises:
        click.ClickException: the web extra is not installed (pip install 'rfetch[web]').
    """
    try:
        import rfetch.web.server  # noqa: F401
    except ImportError as exc:
        raise click.ClickException(
            f"the web UI needs the web extra (pip install 'rfetch[web]'): {exc}"
        ) from None


def _host_port(bind: str) -> tuple[str, int]:
    """``--bind``'s host and port.

    Raises:
        click.BadParameter: not ``HOST:PORT``.
    """
    from rfetch.web.server import parse_bind

    try:
        return parse_bind(bind)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--bind") from None


def _credentials(host: str) -> tuple[BasicAuth | None, bool]:
    """The basic-auth credentials of the environment (``RFETCH_WEB_USER``,
    ``RFETCH_WEB_PASSWORD``), and whether a UI served on ``host`` is open: no credentials
    and a host beyond loopback.

    Raises:
        ValueError: only one of the two variables is set.
    """
    from rfetch.web import BasicAuth
    from rfetch.web.server import is_loopback

    credentials = BasicAuth.from_env()
    # Anyone who can reach an open UI can delete jobs: say so, in the log and on every
    # page (Sidekiq leaves auth to the host application; a standalone server cannot).
    return credentials, credentials is None and not is_loopback(host)


def _warn_open(bind: str, read_only: bool) -> None:
    """Log that the UI on ``bind`` answers anyone who reaches it, and what they can do."""
    logging.getLogger("rfetch.web").warning(
        "the web UI listens on %s without authentication: anyone who can reach it can "
        "%s; set RFETCH_WEB_USER and RFETCH_WEB_PASSWORD, or bind to 127.0.0.1",
        bind, "read every job" if read_only else "retry, delete and kill jobs",
    )


def _banner(app: WebApp, config: Config, urls: str) -> str:
    """The line written once the server listens on ``urls``: version, mode, auth, the
    UI's address and the Redis (or shards) it reads."""
    auth = "basic auth" if app.basic_auth is not None else "no auth"
    mode = "read-only" if app.read_only else "read-write"
    source = f"{len(config.shards)} shards" if config.shards else safe_url(config.redis_url)
    return f"rfetch web {__version__} ({mode}, {auth}) on {urls}{app.prefix}/ for {source}"
