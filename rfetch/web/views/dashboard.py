"""The dashboard: totals, the live chart, daily history, the largest queues and Redis.

With shards: totals, history and queues summed or listed over every shard that answers,
and one row per shard (up or down, its Redis, its jobs waiting) instead of the Redis card.
"""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Response

from ..action import Ctx
from ..charts import history_chart
from ..paging import choice

HISTORY_DAYS = (7, 30, 90)
"""Days of history the dashboard offers."""


def dashboard(ctx: Ctx) -> Response:
    """``GET /``."""
    days = choice(ctx.request.args.get("days"), HISTORY_DAYS, 30)
    shards = ctx.app.shards
    extra: dict[str, Any] = {}
    if shards is None:
        history = ctx.api.history(days)
        queues = ctx.api.queues()
        extra.update(redis=ctx.api.redis_info(), leader_problem=ctx.api.leader_problem(),
                     expired=ctx.api.expired_count())
    else:
        up = ctx.up()
        history = shards.history(days, up)
        queues = shards.queues(up)
        problems = [(i, shards.shard(i).leader_problem()) for i in up]
        waiting: dict[str | None, int] = {}
        for queue in queues:
            waiting[queue.shard] = waiting.get(queue.shard, 0) + queue.size
        extra.update(
            redis=None,
            expired=sum(shards.shard(i).expired_count() for i in up),
            leader_problem="; ".join(f"shard {i}: {p}" for i, p in problems if p) or None,
            shard_rows=[
                (state, shards.shard(state.index).redis_info() if state.up else None,
                 waiting.get(state.name, 0))
                for state in ctx.shard_states()
            ],
        )
    outbox = ctx.app.outbox
    extra["outbox"] = outbox.read() if outbox is not None else None
    queues.sort(key=lambda q: (-q.size, q.name))
    return ctx.render(
        "dashboard.html",
        days=days, day_choices=HISTORY_DAYS, history=history,
        chart=history_chart(history), queues=queues[:10], queue_count=len(queues),
        **extra,
    )
