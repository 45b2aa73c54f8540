"""The busy page: worker processes, their running jobs, and quiet / stop.

With shards, the processes of every shard that answers, each with its shard (a worker of
several shards heartbeats on each), and quiet / stop go to every shard that knows the
identity.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from rfetch.api import Api, ProcessInfo, ProcessNotFound

from ..action import BadRequest, Ctx, Redirect


def _processes(ctx: Ctx, include_dead: bool) -> list[tuple[str | None, ProcessInfo]]:
    shards = ctx.app.shards
    if shards is None:
        return [(None, p) for p in ctx.api.processes.all(include_dead=include_dead)]
    found: list[tuple[str | None, ProcessInfo]] = []
    found.extend(shards.processes(ctx.up(), include_dead=include_dead))
    return found


def busy(ctx: Ctx) -> Response:
    """``GET /busy``: processes (``all=1``: with dead ones) and running jobs, oldest first."""
    include_dead = ctx.request.args.get("all") == "1"
    rows = _processes(ctx, include_dead)
    running = sorted(
        ((shard, job) for shard, p in rows for job in p.running),
        key=lambda row: (row[1].run_at or 0, row[1].identity, row[1].thread_id),
    )
    return ctx.render("busy.html", rows=rows, running=running, include_dead=include_dead)


def busy_action(ctx: Ctx) -> Response:
    """``POST /busy``: ask the selected processes (or ``all``) to go quiet or stop."""
    form = ctx.request.form
    action = form.get("action", "")
    if action not in ("quiet", "stop"):
        raise BadRequest(f"unknown action {action!r}")
    if form.get("all") == "1":
        identities = list(dict.fromkeys(p.identity for _, p in _processes(ctx, False)))
    else:
        identities = form.getlist("identity")
    back = ctx.back(ctx.url_for("busy"))
    if not identities:
        raise Redirect(back, "No process selected.", "warn")
    shards = ctx.app.shards
    apis: list[Api] = (
        [ctx.api] if shards is None else [shards.shard(i) for i in ctx.up()]
    )
    unknown: list[str] = []
    for identity in identities:
        reached = 0
        for api in apis:
            try:
                getattr(api.processes, action)(identity)
                reached += 1
            except ProcessNotFound:
                pass
        if not reached:
            unknown.append(identity)
    done = len(identities) - len(unknown)
    verb = "go quiet" if action == "quiet" else "stop"
    message = (f"Asked {done} process(es) to {verb}; each acts at its next heartbeat."
               if done else "")
    if unknown:
        message += f" Not found (already gone?): {', '.join(unknown)}."
    raise Redirect(back, message.strip(), "warn" if unknown else "ok")
