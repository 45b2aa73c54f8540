"""The queues page and one queue's jobs: pause, unpause, clear, delete jobs.

With shards, the queues page lists the queues of every shard that answers, each with its
shard; one queue's page and its actions are on the shard given by ``?shard=`` (the form's
``shard``), else on the queue's own shard (``shard_map`` or the hash of its name).
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from rfetch.api import DEFAULT_MAX_SCAN

from ..action import BadRequest, Ctx, Redirect
from ..paging import PAGE_SIZES, choice, job_filter, offset_arg, pager, query
from .results import outcome


def queues(ctx: Ctx) -> Response:
    """``GET /queues``: every queue with size, latency, paused flag and jobs dropped as
    expired (with shards, of every shard that answers, with its shard)."""
    shards = ctx.app.shards
    if shards is None:
        return ctx.render("queues.html", queues=ctx.api.queues(),
                          expired=ctx.api.expired_by_queue())
    up = ctx.up()
    expired: dict[str, int] = {}
    for index in up:
        for name, count in shards.shard(index).expired_by_queue().items():
            expired[name] = expired.get(name, 0) + count
    return ctx.render("queues.html", queues=shards.queues(up), expired=expired)


def queue(ctx: Ctx, name: str) -> Response:
    """``GET /queues/<name>``: a page of the queue's jobs, next first (or ``newest``),
    filtered by ``class`` / ``grep``."""
    args = ctx.request.args
    found = ctx.queue_api(name).queue(name)
    limit = choice(args.get("limit"), PAGE_SIZES, 25)
    offset = offset_arg(args.get("offset"))
    newest = args.get("order") == "newest"
    wanted = job_filter(args)
    page = found.page(offset, limit, newest_first=newest, job_filter=wanted,
                      max_scan=DEFAULT_MAX_SCAN)
    return ctx.render(
        "queue.html", queue=found.info(), page=page, limit=limit,
        page_sizes=PAGE_SIZES, order="newest" if newest else "next",
        job_filter=wanted, filtered=not wanted.empty,
        pager=pager(page, limit, exact=wanted.empty),
        query=query(args, "offset"),
    )


def queue_action(ctx: Ctx, name: str) -> Response:
    """``POST /queues/<name>``: ``pause``, ``unpause``, ``clear``, ``delete`` (selected
    jids or ``single``) or ``delete_matching`` (a class or search text)."""
    form = ctx.request.form
    found = ctx.queue_api(name).queue(name)
    action = form.get("action") or ("delete" if form.get("single") else "")
    back = ctx.back(ctx.url_for("queue", name=name))
    if action == "pause":
        found.pause()
        raise Redirect(back, f"Paused queue {name}: workers take no job from it.")
    if action == "unpause":
        found.unpause()
        raise Redirect(back, f"Unpaused queue {name}.")
    if action == "clear":
        count = found.clear()
        raise Redirect(ctx.url_for("queues"),
                       f"Cleared queue {name}: {count:,} job(s) deleted.")
    if action == "delete":
        single = form.get("single")
        jids = [single] if single else form.getlist("jid")
        if not jids:
            raise Redirect(back, "No job selected.", "warn")
        raise Redirect(back, *outcome(found.delete(jids, max_scan=None)))
    if action == "delete_matching":
        wanted = job_filter(form)
        if wanted.empty:
            raise BadRequest("give a class or a search text (or clear the whole queue)")
        raise Redirect(back, *outcome(found.delete_matching(wanted)))
    raise BadRequest(f"unknown action {action!r}")
