"""``rfetch stats`` and ``rfetch queues``: counters, queue sizes and latency, pausing."""

from __future__ import annotations

import click

from .app import main
from .options import admin_view, connection_options
from .output import echo_json, table, yes_no


@main.command()
@click.option("--days", type=click.IntRange(min=0), default=0,
              help="Also show processed/failed for this many UTC days, newest first.")
@connection_options
def stats(days: int, redis_url: str | None, namespace: str | None, as_json: bool) -> None:
    """Processed and failed jobs, queue and set sizes, processes and busy threads (summed
    over every shard when RFETCH_SHARDS is set)."""
    with admin_view(redis_url, namespace) as api:
        current = api.stats()
        history = api.history(days) if days else []
    if as_json:
        echo_json({**current.to_dict(), "history": [d.to_dict() for d in history]})
        return
    table(
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
        table(["DATE (UTC)", "PROCESSED", "FAILED"],
               [(d.date, d.processed, d.failed) for d in history])


@main.command()
@click.option("--pause", "to_pause", multiple=True, metavar="QUEUE",
              help="Pause QUEUE: workers take no job from it until unpaused; repeatable.")
@click.option("--unpause", "to_unpause", multiple=True, metavar="QUEUE",
              help="Unpause QUEUE; repeatable.")
@connection_options
def queues(
    to_pause: tuple[str, ...],
    to_unpause: tuple[str, ...],
    redis_url: str | None,
    namespace: str | None,
    as_json: bool,
) -> None:
    """List queues with size, latency (seconds the oldest job has waited) and paused flag
    (and the shard of each when RFETCH_SHARDS is set)."""
    with admin_view(redis_url, namespace) as api:
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
        echo_json([q.to_dict() for q in found])
        return
    if any(q.shard is not None for q in found):
        table(["QUEUE", "SHARD", "SIZE", "LATENCY_S", "PAUSED"],
              [(q.name, q.shard, q.size, f"{q.latency:.1f}", yes_no(q.paused)) for q in found])
        return
    table(["QUEUE", "SIZE", "LATENCY_S", "PAUSED"],
           [(q.name, q.size, f"{q.latency:.1f}", yes_no(q.paused)) for q in found])
