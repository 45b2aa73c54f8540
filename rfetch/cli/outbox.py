"""``rfetch outbox migrate|status|schema`` and ``rfetch relay``: the transactional outbox
from the shell (docs/outbox.md)."""

from __future__ import annotations

import json
import logging
import signal
import threading
from types import FrameType

import click

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.formatting import safe_url
from rfetch.outbox.backlog import read_backlog
from rfetch.outbox.dialects import schema as sql
from rfetch.outbox.faces import OutboxView, check_backlog, explain_lines
from rfetch.outbox.relay import RelaySettings, describe
from rfetch.outbox.service import build_relay
from rfetch.outbox.service import migrate as create

from .app import main
from .options import NAMESPACE_HELP, REDIS_URL_HELP

DATABASE_HELP = (
    "The outbox's database: postgresql://user@host/db, sqlite:///file.db, "
    "mysql://user:password@host/db [env: RFETCH_OUTBOX_DATABASE]."
)


def _database_option(func: click.decorators.FC) -> click.decorators.FC:
    return click.option("--database", "url", envvar="RFETCH_OUTBOX_DATABASE", required=True,
                        metavar="URL", help=DATABASE_HELP)(func)


def outbox_option(func: click.decorators.FC) -> click.decorators.FC:
    """``--outbox-database`` of ``rfetch explain`` and ``rfetch check``."""
    return click.option("--outbox-database", envvar="RFETCH_OUTBOX_DATABASE", default=None,
                        metavar="URL", help="Also look at the transactional outbox in this "
                        "database [env: RFETCH_OUTBOX_DATABASE].")(func)


def outbox_lines(url: str | None, jid: str) -> list[str]:
    """``rfetch explain``'s lines for ``jid`` in the outbox at ``url`` ([] when none or not
    there; a line saying so when the database cannot be read)."""
    if url is None:
        return []
    import time


    try:
        row = OutboxView(url).row(jid)
    except Exception as exc:
        return [f"outbox: cannot read {safe_url(url)}: {exc}"]
    return [] if row is None else explain_lines(row, time.time())


def check_outbox(
    url: str | None, max_age: float | None, max_size: int | None
) -> tuple[bool | None, str] | None:
    """``rfetch check``'s verdict on the outbox at ``url`` (None without one; see
    :func:`rfetch.outbox.faces.check_backlog`)."""
    if url is None:
        return None

    return check_backlog(OutboxView(url).read(), max_age, max_size)


@main.group()
def outbox() -> None:
    """The outbox table of transactional enqueue (rfetch.outbox.using, Django's
    RFETCH_OUTBOX): create it, see its backlog, print its SQL."""


@outbox.command()
@_database_option
def migrate(url: str) -> None:
    """Create the table rfetch_outbox (and on PostgreSQL the trigger that NOTIFYs the
    relay) in the database at URL; running it again changes nothing."""
    try:
        db = create(url)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"rfetch_outbox ready in {safe_url(url)} ({db.dialect.name})")


@outbox.command()
@click.argument("dialect", type=click.Choice(["postgresql", "sqlite", "mysql"]))
def schema(dialect: str) -> None:
    """Print the SQL that creates the outbox table on DIALECT (for your own migrations)."""
    click.echo(sql(dialect), nl=False)


@outbox.command()
@_database_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=5, show_default=True,
              help="The relays' --max-attempts (rows refused that often are parked).")
def status(url: str, as_json: bool, max_attempts: int) -> None:
    """The backlog: rows committed and not yet relayed, the oldest row's age, and rows
    Redis refused too often (left for an operator)."""
    try:
        found = read_backlog(url, max_attempts)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"size": found.size, "oldest_age": found.oldest_age,
                               "parked": found.parked}))
        return
    click.echo(f"outbox backlog: {found.size} row(s), oldest {found.oldest_age:.3f} s; "
               f"{found.parked} refused by Redis and left for an operator")


@main.command()
@_database_option
@click.option("--redis-url", envvar="REDIS_URL", default=None, help=REDIS_URL_HELP)
@click.option("--namespace", envvar="RFETCH_NAMESPACE", default=None, help=NAMESPACE_HELP)
@click.option("--batch-size", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Rows per round (one transaction, one Redis call).")
@click.option("--poll", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS", help="Seconds between looks at an idle table. [default: "
              "1 on PostgreSQL, woken by NOTIFY; 0.05 elsewhere]")
@click.option("--marker-ttl", type=click.FloatRange(min=1), default=86400.0,
              show_default=True, metavar="SECONDS",
              help="How long a pushed job's marker outlives a relay that died holding it.")
@click.option("--max-attempts", type=click.IntRange(min=1), default=5, show_default=True,
              help="Refusals by Redis after which a row is left for an operator.")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def relay(url: str, redis_url: str | None, namespace: str | None, batch_size: int,
          poll: float | None, marker_ttl: float, max_attempts: int, verbose: bool) -> None:
    """Move committed outbox rows to Redis, each job once, until SIGTERM or SIGINT.

    Several relays may run at once (on SQLite they take turns)."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = RelaySettings(batch_size=batch_size, marker_ttl=marker_ttl,
                             max_attempts=max_attempts)
    try:
        config = Config.from_env(redis_url=redis_url, namespace=namespace)
        relay_ = build_relay(config, url, settings, poll=poll)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    logging.getLogger("rfetch.outbox").info(describe(relay_.settings, safe_url(url)))
    relay_.run(stop)
    logging.getLogger("rfetch.outbox").info("relay stopped; %d job(s) relayed", relay_.relayed)
