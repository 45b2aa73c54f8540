"""``POST /cancel``: cancel one job by jid (``api.cancel``), from the Cancel buttons of the
busy, queue, set and explain pages. With shards, on the shard the button names
(``?shard=``), else on every shard that answers and holds the jid."""

from __future__ import annotations

from werkzeug.wrappers import Response

from rfetch.api import CancelResult

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
    dead = form.get("dead") == "1"
    reason = "cancelled in the web UI"
    back = ctx.back(ctx.url_for("explain", jid=jid))
    shards = ctx.app.shards
    if shards is None or ctx.request.values.get("shard"):
        answer = ctx.api.cancel(jid, dead=dead, reason=reason)
        raise Redirect(back, answer.text, "ok" if answer.cancelled else "warn")
    up = ctx.up()
    holders = shards.holders(jid, up) or up[:1]
    if not holders:
        raise Redirect(back, f"jid {jid}: no shard answers; nothing was cancelled", "error")
    answers: list[tuple[int, CancelResult]] = [
        (i, shards.shard(i).cancel(jid, dead=dead, reason=reason)) for i in holders
    ]
    text = "; ".join(f"shard {i}: {answer.text}" for i, answer in answers)
    cancelled = any(answer.cancelled for _, answer in answers)
    raise Redirect(back, text, "ok" if cancelled else "warn")
