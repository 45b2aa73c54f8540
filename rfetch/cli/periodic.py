"""``rfetch periodic``: the periodic schedules and the leader; pause, unpause, run now."""

from __future__ import annotations

import click

from rfetch.api import PeriodicNotFound

from .app import main
from .options import admin_api, connection_options
from .output import echo_json, table, when, yes_no


@main.group(invoke_without_command=True)
@click.pass_context
def periodic(ctx: click.Context) -> None:
    """Periodic (cron) schedules: list (the default), pause NAME, unpause NAME,
    run NAME."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_schedules)


@periodic.command("list")
@connection_options
def list_schedules(
    redis_url: str | None = None, namespace: str | None = None, as_json: bool = False
) -> None:
    """Every schedule with its next tick, last tick pushed (UTC), counts and paused flag,
    and the leading process."""
    with admin_api(redis_url, namespace) as api:
        schedules = api.periodic()
        leader = api.leader()
    if as_json:
        echo_json({"leader": leader.to_dict(), "schedules": [s.to_dict() for s in schedules]})
        return
    if leader.present:
        click.echo(f"leader: {leader.identity} (since {when(leader.since)} UTC)")
    else:
        click.echo("leader: none has renewed the lease within leader_ttl")
    table(
        ["NAME", "CRON", "TZ", "QUEUE", "NEXT (UTC)", "LAST TICK (UTC)", "LAST JID",
         "PUSHED", "CAUGHT UP", "SKIPPED", "PAUSED"],
        [
            (s.name, s.cron, s.tz, s.queue, when(s.next_tick), when(s.last_tick), s.last_jid,
             s.pushed, s.caught_up, s.skipped, yes_no(s.paused))
            for s in schedules
        ],
    )


def _not_found(name: str) -> click.ClickException:
    return click.ClickException(
        f"no periodic schedule {name!r} (see `rfetch periodic list`; schedules appear once "
        "a leader registered them)"
    )


@periodic.command()
@click.argument("name")
@connection_options
def pause(name: str, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Pause schedule NAME: its ticks pass without a push (not caught up later)."""
    with admin_api(redis_url, namespace) as api:
        try:
            api.pause_periodic(name)
        except PeriodicNotFound:
            raise _not_found(name) from None
    if as_json:
        echo_json({"name": name, "paused": True})
    else:
        click.echo(f"paused periodic schedule {name}")


@periodic.command()
@click.argument("name")
@connection_options
def unpause(name: str, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Unpause schedule NAME: its next tick is pushed."""
    with admin_api(redis_url, namespace) as api:
        try:
            api.unpause_periodic(name)
        except PeriodicNotFound:
            raise _not_found(name) from None
    if as_json:
        echo_json({"name": name, "paused": False})
    else:
        click.echo(f"unpaused periodic schedule {name}")


@periodic.command()
@click.argument("name")
@connection_options
def run(name: str, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Push one job of schedule NAME now, outside its ticks; prints its jid."""
    with admin_api(redis_url, namespace) as api:
        try:
            jid = api.run_periodic(name)
        except PeriodicNotFound:
            raise _not_found(name) from None
    if as_json:
        echo_json({"name": name, "jid": jid})
    elif jid is None:
        click.echo(f"periodic schedule {name}: client middleware stopped the push")
    else:
        click.echo(jid)
