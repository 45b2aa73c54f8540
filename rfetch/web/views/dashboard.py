"""The dashboard: totals, the live chart, daily history, the largest queues and Redis."""

from __future__ import annotations

from werkzeug.wrappers import Response

from ..action import Ctx
from ..charts import history_chart
from ..paging import choice

HISTORY_DAYS = (7, 30, 90)
"""Days of history the dashboard offers."""


def dashboard(ctx: Ctx) -> Response:
    """``GET /``."""
    days = choice(ctx.request.args.get("days"), HISTORY_DAYS, 30)
    history = ctx.api.history(days)
    queues = sorted(ctx.api.queues(), key=lambda q: (-q.size, q.name))
    return ctx.render(
        "dashboard.html",
        days=days, day_choices=HISTORY_DAYS, history=history,
        chart=history_chart(history), queues=queues[:10], queue_count=len(queues),
        redis=ctx.api.redis_info(),
        leader_problem=ctx.api.leader_problem(),
        expired=ctx.api.expired_count(),
    )
