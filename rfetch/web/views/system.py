"""Endpoints for programs rather than pages: ``/stats.json`` (the live chart's poll),
``/metrics`` (Prometheus) and the static files."""

from __future__ import annotations

import json
import time

from werkzeug.exceptions import NotFound
from werkzeug.wrappers import Response

from rfetch.outbox.faces import OutboxCollector

from ..action import Ctx


def stats_json(ctx: Ctx) -> Response:
    """``GET /stats.json``: the totals (with shards, summed over those that answer), and the
    server's time (epoch seconds)."""
    shards = ctx.app.shards
    stats = shards.stats(ctx.up()) if shards is not None else ctx.api.stats()
    body = {**stats.to_dict(), "time": time.time()}
    body.pop("queues", None)
    return Response(json.dumps(body), mimetype="application/json")


def metrics(ctx: Ctx) -> Response:
    """``GET /metrics``: the Prometheus exposition, read from Redis on each scrape. With
    shards, one shard's (``/metrics?shard=N``, default 0): scrape each shard as a target of
    its own, so every series keeps Prometheus' ``instance`` label apart."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    from rfetch.observability.metrics import api_registry

    app = ctx.app
    api = ctx.api
    index = ctx.shard or 0
    if index not in app.metrics_registries:
        app.metrics_registries[index] = api_registry(api, app.metrics_window)
        if app.outbox is not None and index == 0:  # the outbox is one database, not per shard
            app.metrics_registries[index].register(OutboxCollector(app.outbox))
    body = generate_latest(app.metrics_registries[index])
    return Response(body, mimetype=None, content_type=CONTENT_TYPE_LATEST)


def static(ctx: Ctx, name: str) -> Response:
    """``GET /static/<name>``: a file of ``rfetch/web/static`` (cached a day)."""
    found = ctx.app.static_files.get(name)
    if found is None:
        raise NotFound()
    body, mimetype = found
    response = Response(body, mimetype=mimetype)
    response.headers["Cache-Control"] = "public, max-age=86400"
    return response
