"""The busy page: worker processes, their running jobs, and quiet / stop."""

from __future__ import annotations

from werkzeug.wrappers import Response

from rfetch.api import ProcessNotFound

from ..action import BadRequest, Ctx, Redirect


def busy(ctx: Ctx) -> Response:
    """``GET /busy``: processes (``all=1``: with dead ones) and running jobs, oldest first."""
    include_dead = ctx.request.args.get("all") == "1"
    processes = ctx.api.processes.all(include_dead=include_dead)
    running = sorted(
        (job for p in processes for job in p.running),
        key=lambda j: (j.run_at or 0, j.identity, j.thread_id),
    )
    return ctx.render("busy.html", processes=processes, running=running,
                      include_dead=include_dead)


def busy_action(ctx: Ctx) -> Response:
    """``POST /busy``: ask the selected processes (or ``all``) to go quiet or stop."""
    form = ctx.request.form
    action = form.get("action", "")
    if action not in ("quiet", "stop"):
        raise BadRequest(f"unknown action {action!r}")
    if form.get("all") == "1":
        identities = [p.identity for p in ctx.api.processes.all()]
    else:
        identities = form.getlist("identity")
    back = ctx.back(ctx.url_for("busy"))
    if not identities:
        raise Redirect(back, "No process selected.", "warn")
    unknown: list[str] = []
    for identity in identities:
        try:
            getattr(ctx.api.processes, action)(identity)
        except ProcessNotFound:
            unknown.append(identity)
    done = len(identities) - len(unknown)
    verb = "go quiet" if action == "quiet" else "stop"
    message = (f"Asked {done} process(es) to {verb}; each acts at its next heartbeat."
               if done else "")
    if unknown:
        message += f" Not found (already gone?): {', '.join(unknown)}."
    raise Redirect(back, message.strip(), "warn" if unknown else "ok")
