"""``POST /cancel``: cancel one job by jid (``api.cancel``), from the Cancel buttons of the
busy, queue, set and explain pages."""

from __future__ import annotations

from werkzeug.wrappers import Response

from ..action import BadRequest, Ctx, Redirect


def cancel_action(ctx: Ctx) -> Response:
    """Cancel the form's ``jid`` (``dead=1``: to the dead set), then go back with what was
    done as the flash message.

    Raises:
        BadRequest: no jid.
    """
    form = ctx.request.form
    jid = (form.get("jid") or "").strip()
    if not jid:
        raise BadRequest("no jid given")
    answer = ctx.api.cancel(jid, dead=form.get("dead") == "1", reason="cancelled in the web UI")
    back = ctx.back(ctx.url_for("explain", jid=jid))
    raise Redirect(back, answer.text, "ok" if answer.cancelled else "warn")
