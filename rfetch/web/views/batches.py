"""The Batches pages (Sidekiq Pro's): the newest batches with progress bars, and one batch
with its counters, callbacks (and whether each fired), failures with their errors, child
batches and a page of its jobs."""

from __future__ import annotations

from werkzeug.wrappers import Response

from rfetch.api.batches import batch_counters, batch_detail, count_batches, list_batches
from rfetch.errors import BatchNotFound

from ..action import Ctx, Redirect
from ..paging import bounded_int, offset_arg

PAGE = 25
"""Batches per page of the list."""

JOBS_PAGE = 100
"""Jobs per page of one batch."""


def batches(ctx: Ctx) -> Response:
    """``GET /batches?offset=N``: batches newest first, ``PAGE`` at a time."""
    offset = offset_arg(ctx.request.args.get("offset"))
    api_ctx = ctx.api.ctx
    return ctx.render(
        "batches.html", batches=list_batches(api_ctx, offset, PAGE), offset=offset, page=PAGE,
        total=count_batches(api_ctx), counters=batch_counters(api_ctx),
    )


def batch(ctx: Ctx, bid: str) -> Response:
    """``GET /batches/<bid>?offset=N``: one batch and a page of its jobs."""
    offset = bounded_int(ctx.request.args.get("offset"), 0, 0, 10**9)
    try:
        detail = batch_detail(ctx.api.ctx, bid, offset, JOBS_PAGE)
    except BatchNotFound:
        raise Redirect(ctx.url_for("batches"),
                       f"No batch {bid}: never created, or expired (24 h after success, "
                       "30 days otherwise by default).", "error") from None
    return ctx.render("batch.html", d=detail, st=detail.status, offset=offset, page=JOBS_PAGE)
