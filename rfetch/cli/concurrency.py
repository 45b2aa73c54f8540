"""``rfetch concurrency``: the concurrency keys of fetch caps, with their running and
waiting jobs (docs/flow-control.md)."""

from __future__ import annotations

import click

from .app import main
from .options import admin_api, connection_options
from .output import echo_json, table


@main.command()
@click.option("--queue", "queue_name", default=None, help="Only this queue's keys.")
@click.option("--full", "only_full", is_flag=True,
              help="Only keys whose every slot is taken (their jobs wait).")
@connection_options
def concurrency(
    queue_name: str | None,
    only_full: bool,
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """Concurrency keys (fetch caps): limit, jobs running (fetched, holding a slot) and
    jobs waiting in Redis, not fetched, for every key with jobs of either kind."""
    with admin_api(redis_url, namespace) as api:
        found = api.concurrency_keys(queue_name)
    if only_full:
        found = [k for k in found if k.full]
    if as_json:
        echo_json([k.to_dict() for k in found])
        return
    table(["QUEUE", "KEY", "RUNNING", "LIMIT", "WAITING"],
           [(k.queue, k.key, k.running, k.limit, k.waiting) for k in found])
