"""``rfetch batches`` and ``rfetch batch BID``: batches with their progress, one batch's
jobs, failures and callbacks (Sidekiq Pro's Batches page, in a terminal)."""

from __future__ import annotations

import click

from rfetch.api.batches import batch_counters, batch_detail, list_batches
from rfetch.errors import BatchNotFound

from .app import main
from .options import admin_api, connection_options
from .output import echo_json, table, when


@main.command()
@click.option("--limit", default=25, show_default=True, type=click.IntRange(1, 1000),
              help="Batches to show, newest first.")
@connection_options
def batches(
    limit: int, redis_url: str | None = None, namespace: str | None = None,
    as_json: bool = False,
) -> None:
    """The newest batches: progress, failures and state (running, complete, succeeded,
    dead)."""
    with admin_api(redis_url, namespace) as api:
        rows = list_batches(api.ctx, 0, limit)
        counters = batch_counters(api.ctx)
    if as_json:
        echo_json({"batches": [b.as_dict() for b in rows], "counters": counters})
        return
    table(
        ["BID", "DESCRIPTION", "CREATED (UTC)", "TOTAL", "PENDING", "FAILURES", "DONE %",
         "STATE"],
        [(b.bid, b.description, when(b.created_at), b.total, b.pending, b.failures,
          f"{b.percent:.1f}", b.state) for b in rows],
    )
    click.echo(", ".join(f"{n} {event}" for event, n in counters.items()))


@main.command()
@click.argument("bid")
@click.option("--jobs", "show_jobs", default=20, show_default=True,
              type=click.IntRange(0, 100_000), help="Jobs to list (sorted by jid).")
@connection_options
def batch(
    bid: str, show_jobs: int, redis_url: str | None = None, namespace: str | None = None,
    as_json: bool = False,
) -> None:
    """Batch BID: its counters, callbacks (and whether each fired), failures with their
    errors, child batches and its first jobs."""
    with admin_api(redis_url, namespace) as api:
        try:
            detail = batch_detail(api.ctx, bid, 0, max(show_jobs, 1))
        except BatchNotFound:
            raise click.ClickException(
                f"no batch {bid} (never created, or expired: 24 h after success, 30 days "
                "otherwise by default)"
            ) from None
    st = detail.status
    if as_json:
        echo_json({
            **st.as_dict(),
            "callbacks_state": [c.__dict__ for c in detail.callbacks],
            "kids_bids": detail.kids,
            "jobs": [j.__dict__ for j in detail.jobs[:show_jobs]],
        })
        return
    click.echo(f"batch {st.bid}: {st.description}")
    click.echo(f"created {when(st.created_at)} UTC; total {st.total}, pending {st.pending}, "
               f"failures {st.failures}; child batches {st.kids} ({st.kids_pending} pending)")
    for event, at in (("complete", st.complete_at), ("success", st.success_at),
                      ("death", st.death_at)):
        click.echo(f"{event}: {'fired ' + when(at) + ' UTC' if at is not None else 'not yet'}")
    if detail.callbacks:
        table(["CALLBACK", "CLASS", "QUEUE", "JID", "PUSHED (UTC)"],
              [(c.event, c.job_class, c.queue, c.jid, when(c.fired_at))
               for c in detail.callbacks])
    if st.failure_info:
        table(["FAILED JID", "ERROR"],
              [(f.jid, f"{f.error_class}: {f.error_message}") for f in st.failure_info])
    if detail.kids:
        click.echo("child batches: " + " ".join(detail.kids))
    if show_jobs:
        table(["JID", "STATE", "ERROR"],
              [(j.jid, j.state, f"{j.error_class}: {j.error_message}" if j.error_class else "")
               for j in detail.jobs[:show_jobs]])
