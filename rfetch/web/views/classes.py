"""The job classes page: jobs per class in every queue and set, and per-class run figures."""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Response

from ..action import Ctx
from ..paging import choice

CLASS_WINDOWS = (5, 15, 60, 120)
"""Minutes of per-class figures the page offers."""

CLASS_COUNT_SCAN = 10_000
"""Entries examined per queue or set when counting jobs per class."""


def classes(ctx: Ctx) -> Response:
    """``GET /classes``: one row per class, the busiest first."""
    minutes = choice(ctx.request.args.get("minutes"), CLASS_WINDOWS, 60)
    counts = ctx.api.class_counts(max_scan=CLASS_COUNT_SCAN)
    metrics = {m.job_class: m for m in ctx.api.class_metrics(minutes)}
    rows: dict[str, dict[str, Any]] = {}
    incomplete: list[str] = []

    def row(name: str) -> dict[str, Any]:
        return rows.setdefault(name, {"queued": 0, "queues": {}, "schedule": 0,
                                      "retry": 0, "dead": 0, "running": 0})

    for place in counts:
        if not place.complete:
            incomplete.append(place.location.replace("queue:", "queue "))
        for name, n in place.counts.items():
            r = row(name)
            if place.location.startswith("queue:"):
                r["queued"] += n
                r["queues"][place.location[6:]] = n
            else:
                r[place.location] += n
    for name in metrics:
        row(name)
    ordered = sorted(
        rows.items(),
        key=lambda item: (
            -(item[1]["queued"] + item[1]["retry"] + item[1]["dead"]
              + item[1]["schedule"] + item[1]["running"]),
            -(metrics[item[0]].processed if item[0] in metrics else 0),
            item[0],
        ),
    )
    return ctx.render("classes.html", rows=ordered, metrics=metrics,
                      minutes=minutes, windows=CLASS_WINDOWS, incomplete=incomplete,
                      scan=CLASS_COUNT_SCAN)
