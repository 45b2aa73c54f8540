"""The keys page: held ordering keys, keys blocked by a failed job, and the tenants of fair
queues with their weights."""

from __future__ import annotations

from werkzeug.wrappers import Response

from ..action import BadRequest, Ctx, Redirect
from ..paging import PAGE_SIZES, choice

KEYS_BLOCKED_SCAN = 100_000
"""Retry-set entries examined when looking for blocked ordering keys on the keys page."""


def keys(ctx: Ctx) -> Response:
    """``GET /keys``: ordering keys and fair tenants; the unblock buttons post to the retry
    and dead set actions (:func:`rfetch.web.views.sets.set_action`), the weight form to
    :func:`keys_action`."""
    args = ctx.request.args
    api = ctx.api
    limit = choice(args.get("limit"), PAGE_SIZES, 50)
    queue = (args.get("queue") or "").strip() or None
    queue_names = [q.name for q in api.queues()]
    held = api.ordering_keys(queue, limit=limit)
    key_total = api.ordering_key_count(queue)
    blocked = api.blocked_keys(queue, max_scan=KEYS_BLOCKED_SCAN)
    tenants = []
    for name in [queue] if queue is not None else queue_names:
        listed = api.tenants(name, limit=limit)
        if listed:
            total = api.tenant_count(name) if len(listed) == limit else len(listed)
            tenants.append((name, listed, total))
    return ctx.render(
        "keys.html", keys=held, key_total=key_total, blocked=blocked,
        blocked_scan=KEYS_BLOCKED_SCAN, tenants=tenants, queue=queue,
        queue_names=queue_names, limit=limit, page_sizes=PAGE_SIZES,
        set_slugs={"retry": "retries", "dead": "dead"},
    )


def keys_action(ctx: Ctx) -> Response:
    """``POST /keys``: set a tenant's weight; the only action of the keys page not on a job
    set."""
    form = ctx.request.form
    back = ctx.back(ctx.url_for("keys"))
    if form.get("action") != "weight":
        raise BadRequest(f"unknown action {form.get('action')!r}")
    queue = (form.get("queue") or "").strip()
    tenant = (form.get("tenant") or "").strip()
    if not queue:
        raise Redirect(back, "Give the queue of the tenant.", "error")
    try:
        weight = int((form.get("weight") or "").strip())
    except ValueError:
        raise Redirect(back, "The weight must be a whole number from 1 to 1000.",
                       "error") from None
    try:
        ctx.api.set_tenant_weight(queue, tenant, weight)
    except ValueError as exc:
        raise Redirect(back, str(exc), "error") from None
    raise Redirect(back, f"Tenant {tenant} of queue {queue} now gets {weight} job(s) "
                         "per turn, from its next turn.")
