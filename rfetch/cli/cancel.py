"""``rfetch cancel JID``: cancel one job wherever it is (through :func:`rfetch.api.cancel`)."""

from __future__ import annotations

import sys

import click

from .app import main
from .options import admin_api, connection_options
from .output import echo_json

EXIT_NOT_CANCELLED = 1
"""The jid was not found, or is already in the dead set."""


@main.command()
@click.argument("jid")
@click.option("--dead", is_flag=True,
              help="Put the cancelled job in the dead set (default: drop it).")
@click.option("--reason", default="", metavar="TEXT",
              help="Why: shown in the error message and to the death handlers.")
@click.option("--max-scan", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Most entries examined per queue, private list or set.")
@connection_options
def cancel(
    jid: str,
    dead: bool,
    reason: str,
    max_scan: int,
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """Cancel job JID: a waiting job (queue, scheduled or retry set) is deleted; one a
    worker fetched and has not started, or waiting behind its ordering key or fetch cap,
    will not run (the worker records it as cancelled); a running one is told to stop
    (rfetch.JobCancelled) and stopped for real after the workers' job-timeout grace. A
    cancelled job is never retried. Exits 1 when the jid is not found (it finished), or
    already dead or cancelled."""
    if not jid.strip():
        raise click.BadParameter("a jid is needed", param_hint="JID")
    with admin_api(redis_url, namespace) as api:
        answer = api.cancel(jid, dead=dead, reason=reason, max_scan=max_scan)
    if as_json:
        echo_json(answer.to_dict())
    else:
        click.echo(answer.text)
    if not answer.cancelled:
        sys.exit(EXIT_NOT_CANCELLED)
