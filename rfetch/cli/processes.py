"""``rfetch processes``: list worker processes, ask them to go quiet or stop, remove
dead ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .app import main
from .options import admin_api, connection_options
from .output import echo_json, table, when, yes_no

if TYPE_CHECKING:
    from rfetch.api import Api


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
@connection_options
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
    with admin_api(redis_url, namespace) as api:
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
        echo_json([p.to_dict() for p in found])
        return
    table(
        ["IDENTITY", "TAG", "STARTED (UTC)", "RSS_MB", "BUSY", "QUIET", "ALIVE", "QUEUES",
         "SWARM"],
        [
            (
                p.identity,
                p.tag,
                when(p.started_at),
                f"{p.rss_kb / 1024:.1f}",
                f"{p.busy}/{p.concurrency}",
                yes_no(p.quiet),
                yes_no(p.alive),
                ",".join(p.queues),
                f"{p.swarm}#{p.slot}" if p.swarm else None,
            )
            for p in found
        ],
    )
    for p in found:
        for job in p.running:
            progress = ""
            if job.progress:
                message = job.progress.get("message") or ""
                progress = f" progress {float(job.progress.get('percent', 0)):.0f}% {message}"
            click.echo(
                f"  {p.identity} thread {job.thread_id}: {job.job.job_class} "
                f"jid={job.job.jid} queue={job.queue} since {when(job.run_at)}"
                + progress.rstrip()
            )
