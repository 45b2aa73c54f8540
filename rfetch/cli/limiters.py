"""``rfetch limits``: the limiters (``rfetch.Limiter``) with their use, locks and counters;
reset one, release a stuck lock."""

from __future__ import annotations

import click

from rfetch.api import LimiterNotFound

from .app import main
from .options import admin_api, connection_options
from .output import echo_json, table


@main.group(invoke_without_command=True)
@click.pass_context
def limits(ctx: click.Context) -> None:
    """Limiters: list (the default), show NAME, reset NAME, release NAME TOKEN."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_limiters)


def _period(seconds: float) -> str:
    return "-" if seconds == 0 else f"{seconds:g}s"


@limits.command("list")
@connection_options
def list_limiters(
    redis_url: str | None = None, namespace: str | None = None, as_json: bool = False
) -> None:
    """Every limiter: kind, limit per period, current use, locks held, grants, waits and
    over-limit calls (from the registry key rfetch:limiters)."""
    with admin_api(redis_url, namespace) as api:
        infos = api.limiters()
    if as_json:
        echo_json([i.to_dict() for i in infos])
        return
    table(
        ["NAME", "KIND", "LIMIT", "PER", "IN USE", "CALLS", "WAITED", "WAIT S", "OVER LIMIT",
         "RECLAIMED"],
        [
            (i.name, i.kind, i.limit, _period(i.period), f"{i.in_use}/{i.capacity}", i.calls,
             i.waited, f"{i.wait_seconds:.1f}", i.overlimit, i.reclaimed)
            for i in infos
        ],
    )


def _not_found(name: str) -> click.ClickException:
    return click.ClickException(
        f"no limiter {name!r} (see `rfetch limits list`; a limiter appears at its first "
        "call and expires after its ttl without one)"
    )


@limits.command()
@click.argument("name")
@connection_options
def show(name: str, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """One limiter, with the locks held (token, holder, seconds to expiry)."""
    with admin_api(redis_url, namespace) as api:
        try:
            info = api.limiter(name)
        except LimiterNotFound:
            raise _not_found(name) from None
    if as_json:
        echo_json(info.to_dict())
        return
    click.echo(f"{info.name}: {info.kind}, limit {info.limit} per {_period(info.period)}, "
               f"in use {info.in_use}/{info.capacity}, over limit {info.overlimit}")
    if info.kind == "concurrent":
        table(["TOKEN", "HOLDER", "EXPIRES IN"],
              [(lock.token, lock.holder, f"{lock.expires_in:.1f}s") for lock in info.locks])


@limits.command()
@click.argument("name")
@connection_options
def reset(name: str, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Delete limiter NAME's state, locks and counters (it starts afresh at its next call;
    live holders of dropped locks log it at their next renewal)."""
    with admin_api(redis_url, namespace) as api:
        existed = api.reset_limiter(name)
    if as_json:
        echo_json({"name": name, "reset": existed})
    elif not existed:
        raise _not_found(name)
    else:
        click.echo(f"reset limiter {name}")


@limits.command()
@click.argument("name")
@click.argument("token")
@connection_options
def release(
    name: str, token: str, redis_url: str | None, namespace: str | None, as_json: bool
) -> None:
    """Drop lock TOKEN of concurrent limiter NAME now (a holder known to be gone)."""
    with admin_api(redis_url, namespace) as api:
        held = api.release_limiter_lock(name, token)
    if as_json:
        echo_json({"name": name, "token": token, "released": held})
    elif not held:
        raise click.ClickException(f"limiter {name!r} holds no lock {token!r}")
    else:
        click.echo(f"released lock {token} of limiter {name}")
