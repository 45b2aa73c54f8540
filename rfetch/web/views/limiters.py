"""The Limits page (Sidekiq Enterprise's limiter page): every limiter (``rfetch.Limiter``)
with its kind, limit, current use, held locks and their holders, waits and over-limit
counts; reset a limiter, release a stuck lock."""

from __future__ import annotations

from werkzeug.wrappers import Response

from ..action import BadRequest, Ctx, Redirect

TABS: tuple[tuple[str, str, str], ...] = (
    ("limiters", "limits", "Limiters"),
    ("concurrency", "concurrency", "Concurrency keys"),
)
"""The tabs of the Limits page: (key, endpoint, label). Another flow-control table of the
same page (concurrency keys, say) adds its own view module and a tab here."""


def limits(ctx: Ctx) -> Response:
    """``GET /limits``."""
    return ctx.render("limits.html", limiters=ctx.api.limiters(), tabs=TABS, tab="limiters")


def limits_action(ctx: Ctx, name: str) -> Response:
    """``POST /limits/<name>``: ``reset`` (delete its state, locks and counters) or
    ``release`` (drop the lock named by the form's ``token``)."""
    action = ctx.request.form.get("action", "")
    back = ctx.back(ctx.url_for("limits"))
    api = ctx.api
    if action == "reset":
        if api.reset_limiter(name):
            raise Redirect(back, f"Reset limiter {name}: it starts afresh at its next call.")
        raise Redirect(back, f"No limiter {name} (expired, or reset already).", "warn")
    if action == "release":
        token = ctx.request.form.get("token", "")
        if not token:
            raise BadRequest("release needs a token")
        if api.release_limiter_lock(name, token):
            raise Redirect(back, f"Released lock {token} of {name}.")
        raise Redirect(back, f"Lock {token} of {name} was no longer held.", "warn")
    raise BadRequest(f"unknown action {action!r}")
