"""``rfetch result JID`` (a store_result job's recorded outcome, optionally waited for) and
``rfetch waiting`` (jobs waiting on another job)."""

from __future__ import annotations

import json
import sys

import click

from rfetch.errors import JobDied, ResultTimeout
from rfetch.push.client import Client
from rfetch.workflow.results import result as wait_result

from .app import main
from .options import admin_api, connection_options
from .output import echo_json, table, when


@main.command()
@click.argument("jid")
@click.option("--wait", "wait", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to wait for the job to end (a blocking wait, no polling).")
@connection_options
def result(
    jid: str, wait: float, redis_url: str | None, namespace: str | None, as_json: bool
) -> None:
    """The recorded outcome of job JID (pushed with store_result): prints its return value
    as JSON. Exits 1 when the job died (its error is printed) or has no outcome yet."""
    with admin_api(redis_url, namespace) as api:
        client = Client(api.config, api.redis)
        try:
            value = wait_result(jid, wait, client)
        except JobDied as died:
            if as_json:
                echo_json({"jid": jid, "status": died.status, "error_class": died.error_class,
                           "error_message": died.error_message})
            else:
                click.echo(f"{jid}: {died.status}: {died.error_class}: {died.error_message}")
            sys.exit(1)
        except ResultTimeout as waited:
            if as_json:
                echo_json({"jid": jid, "status": "none", "error": str(waited)})
            else:
                click.echo(str(waited))
            sys.exit(1)
        record = api.result_record(jid)
    if as_json:
        echo_json({"jid": jid, "status": "succeeded", "result": value,
                   "finished_at": record.finished_at if record else None})
    else:
        click.echo(json.dumps(value))


@main.command()
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Most waiting jobs listed, oldest wait first.")
@connection_options
def waiting(limit: int, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Jobs waiting on another job (after=, chains): what each waits for, and since when."""
    with admin_api(redis_url, namespace) as api:
        found = api.waiting(limit)
        total = api.waiting_count()
    if as_json:
        echo_json({"total": total, "jobs": [w.to_dict() for w in found]})
        return
    table(
        ["JID", "CLASS", "QUEUE", "WAITS FOR", "SINCE (UTC)"],
        [(w.jid, w.job_class, w.queue, w.after, when(w.since)) for w in found],
    )
    click.echo(f"{total} waiting job(s)")
