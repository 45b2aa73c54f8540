"""The periodic page: every schedule with its next and last tick, counts and paused flag,
and the leader; pause, unpause and run now (Sidekiq Enterprise 8's periodic controls)."""

from __future__ import annotations

from werkzeug.wrappers import Response

from rfetch.api import PeriodicNotFound

from ..action import BadRequest, Ctx, Redirect


def periodic(ctx: Ctx) -> Response:
    """``GET /periodic``."""
    return ctx.render(
        "periodic.html", schedules=ctx.api.periodic(), leader=ctx.api.leader(),
    )


def periodic_action(ctx: Ctx, name: str) -> Response:
    """``POST /periodic/<name>``: ``pause``, ``unpause`` or ``run`` (push one job now,
    outside the ticks)."""
    action = ctx.request.form.get("action", "")
    back = ctx.back(ctx.url_for("periodic"))
    api = ctx.api
    try:
        if action == "pause":
            api.pause_periodic(name)
            raise Redirect(back, f"Paused {name}: its ticks pass without a push until "
                                 "it is unpaused.")
        if action == "unpause":
            api.unpause_periodic(name)
            raise Redirect(back, f"Unpaused {name}: its next tick is pushed.")
        if action == "run":
            jid = api.run_periodic(name)
            if jid is None:
                raise Redirect(back, f"Client middleware stopped the push of {name}.", "warn")
            raise Redirect(back, f"Pushed one job of {name} now: {jid}.")
    except PeriodicNotFound:
        raise Redirect(back, f"No periodic schedule {name} (removed by a deploy?).",
                       "error") from None
    raise BadRequest(f"unknown action {action!r}")
