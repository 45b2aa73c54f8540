"""The "find a job" page: where a jid is and why it is not running (``api.explain``).

With shards, the jid is looked up on every shard that answers, and each shard that holds it
gives its own answer, named.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from rfetch.api import Explanation

from ..action import Ctx

SET_SLUGS = {"scheduled": "scheduled", "retry": "retries", "dead": "dead"}
"""The set page of each place ``explain`` reports."""

ENDED = ("dead", "finished", "recorded_dead", "recorded_cancelled", "cancel", "iteration",
         "steps")
"""States of a job that ended, and the lines of a pending cancel and of a durable job's
saved state: no Cancel button there."""


def explain(ctx: Ctx) -> Response:
    """``GET /explain?jid=...``."""
    jid = (ctx.request.args.get("jid") or "").strip()
    answers: list[tuple[str | None, Explanation]] = []
    shards = ctx.app.shards
    if jid and shards is None:
        answers.append((None, ctx.api.explain(jid)))
    elif jid and shards is not None:
        up = ctx.up()
        answers.extend(shards.locate(jid, up))
        if not answers and up:  # not found anywhere: the first live shard says so
            answers.append((None, shards.shard(up[0]).explain(jid)))
    # A store_result job's outcome (on one Redis; with shards, explain's lines carry it).
    record = ctx.api.result_record(jid) if jid and shards is None else None
    return ctx.render("explain.html", jid=jid, answers=answers, record=record,
                      set_slugs=SET_SLUGS, ended=ENDED)
