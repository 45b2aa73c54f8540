"""The "find a job" page: where a jid is and why it is not running (``api.explain``)."""

from __future__ import annotations

from werkzeug.wrappers import Response

from ..action import Ctx

SET_SLUGS = {"scheduled": "scheduled", "retry": "retries", "dead": "dead"}
"""The set page of each place ``explain`` reports."""

ENDED = ("dead", "finished", "recorded_dead", "recorded_cancelled")
"""States of a job that ended: nothing to cancel there."""


def explain(ctx: Ctx) -> Response:
    """``GET /explain?jid=...``."""
    jid = (ctx.request.args.get("jid") or "").strip()
    answer = ctx.api.explain(jid) if jid else None
    record = ctx.api.result_record(jid) if jid else None  # a store_result job's outcome
    return ctx.render("explain.html", jid=jid, answer=answer, record=record,
                      set_slugs=SET_SLUGS, ended=ENDED)
