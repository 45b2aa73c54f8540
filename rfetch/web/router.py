"""The routing table of the web UI: URL rules and the view answering each endpoint
(Sidekiq's ``web/router.rb``). Every GET only reads; every POST is an action."""

from __future__ import annotations

from collections.abc import Callable

from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Response

from .views import (
    batches,
    busy,
    cancel,
    classes,
    concurrency,
    dashboard,
    explain,
    keys,
    limiters,
    periodic,
    queues,
    sets,
    system,
)
from .views.results import ACTION_LABELS

View = Callable[..., Response]

_SET = "<any(retries,scheduled,dead):kind>"

ROUTES: tuple[tuple[str, str, str, View], ...] = (
    ("/", "dashboard", "GET", dashboard.dashboard),
    ("/stats.json", "stats_json", "GET", system.stats_json),
    ("/busy", "busy", "GET", busy.busy),
    ("/busy", "busy_action", "POST", busy.busy_action),
    ("/queues", "queues", "GET", queues.queues),
    ("/queues/<path:name>", "queue", "GET", queues.queue),
    ("/queues/<path:name>", "queue_action", "POST", queues.queue_action),
    (f"/{_SET}", "set_page", "GET", sets.set_page),
    (f"/{_SET}", "set_action", "POST", sets.set_action),
    (f"/{_SET}/<key>", "set_job", "GET", sets.set_job),
    (f"/{_SET}/<key>", "set_job_action", "POST", sets.set_job_action),
    ("/classes", "classes", "GET", classes.classes),
    ("/keys", "keys", "GET", keys.keys),
    ("/keys", "keys_action", "POST", keys.keys_action),
    ("/limits/concurrency", "concurrency", "GET", concurrency.concurrency),
    ("/periodic", "periodic", "GET", periodic.periodic),
    ("/periodic/<path:name>", "periodic_action", "POST", periodic.periodic_action),
    ("/batches", "batches", "GET", batches.batches),
    ("/batches/<bid>", "batch", "GET", batches.batch),
    ("/limits", "limits", "GET", limiters.limits),
    ("/limits/<name>", "limits_action", "POST", limiters.limits_action),
    ("/explain", "explain", "GET", explain.explain),
    ("/cancel", "cancel_action", "POST", cancel.cancel_action),
    ("/metrics", "metrics", "GET", system.metrics),
    ("/static/<name>", "static", "GET", system.static),
)
"""(rule, endpoint, method, view) of every route."""

VIEWS: dict[str, View] = {endpoint: view for _rule, endpoint, _method, view in ROUTES}
"""The view of each endpoint."""


def url_map() -> Map:
    """A fresh werkzeug ``Map`` of :data:`ROUTES` (one per application)."""
    return Map(
        [Rule(rule, endpoint=endpoint, methods=[method]) for rule, endpoint, method, _ in ROUTES],
        strict_slashes=False,
    )


__all__ = ["ACTION_LABELS", "ROUTES", "VIEWS", "url_map"]
