"""The concurrency page (``/limits/concurrency``, a tab of the Limits page): every
concurrency key of the fetch caps with its limit, running jobs (holding a slot) and waiting
jobs (in Redis, not fetched)."""

from __future__ import annotations

from werkzeug.wrappers import Response

from ..action import Ctx
from .limiters import TABS


def concurrency(ctx: Ctx) -> Response:
    """``GET /limits/concurrency``: keys of every capped queue, or of ``?queue=``; full
    keys (every slot taken) first, then by queue and key."""
    queue = (ctx.request.args.get("queue") or "").strip() or None
    rows = ctx.api.concurrency_keys(queue)
    rows.sort(key=lambda k: (not k.full, k.queue, k.key))
    return ctx.render(
        "concurrency.html", rows=rows, queue=queue,
        running=sum(k.running for k in rows), waiting=sum(k.waiting for k in rows),
        tabs=TABS, tab="concurrency",
    )
