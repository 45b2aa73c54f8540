"""``rfetch keys`` and ``rfetch tenants``: held ordering keys and the tenants of fair
queues."""

from __future__ import annotations

import click

from .app import main
from .options import admin_api, connection_options
from .output import echo_json, table


@main.command()
@click.option("--queue", "queue_name", default=None, help="Only this queue's keys.")
@click.option("--blocked", is_flag=True, help="Only keys blocked by a failed job.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True,
              help="Most keys listed.")
@connection_options
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
    with admin_api(redis_url, namespace) as api:
        found = api.blocked_keys(queue_name)[:limit] if blocked else api.ordering_keys(
            queue_name, limit
        )
    if as_json:
        echo_json([k.to_dict() for k in found])
        return
    table(["QUEUE", "KEY", "HOLDER", "PLACE", "PENDING"],
           [(k.queue, k.key, k.holder, k.place, k.pending) for k in found])


@main.command()
@click.argument("queue_name", metavar="QUEUE")
@click.option("--weight", nargs=2, type=(str, click.IntRange(1, 1000)), default=None,
              metavar="TENANT N", help="Set TENANT's weight (jobs per turn) to N first.")
@connection_options
def tenants(
    queue_name: str,
    weight: tuple[str, int] | None,
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """Tenants of a fair queue: backlog, weight and turn in the round robin (0 = next)."""
    with admin_api(redis_url, namespace) as api:
        if weight is not None:
            try:
                api.set_tenant_weight(queue_name, weight[0], weight[1])
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--weight") from None
        found = api.tenants(queue_name)
    if as_json:
        echo_json([t.to_dict() for t in found])
        return
    table(["TENANT", "BACKLOG", "WEIGHT", "TURN"],
           [(t.tenant, t.backlog, t.weight, t.turn) for t in found])
