"""The retry, scheduled and dead sets: a page of jobs, one job, and the actions on them."""

from __future__ import annotations

from dataclasses import dataclass

from werkzeug.wrappers import Response

from rfetch.api import DEFAULT_MAX_SCAN, JobRecord, JobSet

from ..action import BadRequest, Ctx, Redirect
from ..formatting import digest, parse_entry_key
from ..paging import PAGE_SIZES, choice, job_filter, offset_arg, pager, query
from .results import ACTION_LABELS, outcome


@dataclass(frozen=True)
class SetKind:
    """One of the three sorted-set pages.

    Attributes:
        actions: what the page offers, in button order (the API's names).
        labels: button labels, by action.
    """

    slug: str
    title: str
    when: str
    default_order: str
    empty: str
    actions: tuple[str, ...]
    labels: dict[str, str]


SET_KINDS = {
    "retries": SetKind("retries", "Retries", "Next retry", "asc",
                       "No failed job is waiting for a retry.",
                       ("retry", "add_to_queue", "delete", "kill"), ACTION_LABELS),
    # A scheduled job has not failed: "run now" pushes it unchanged (the CLI's
    # ``scheduled retry``), so the retry count is not touched.
    "scheduled": SetKind("scheduled", "Scheduled", "Runs at", "asc", "No job is scheduled.",
                         ("add_to_queue", "delete", "kill"),
                         {**ACTION_LABELS, "add_to_queue": "Run now"}),
    "dead": SetKind("dead", "Dead", "Died", "desc", "The dead set is empty.",
                    ("retry", "add_to_queue", "delete"), ACTION_LABELS),
}


def set_page(ctx: Ctx, kind: str) -> Response:
    """``GET /<kind>``: a page of the set, by time or retry count, filtered."""
    args = ctx.request.args
    info = SET_KINDS[kind]
    job_set = ctx.api.job_set(kind)
    limit = choice(args.get("limit"), PAGE_SIZES, 25)
    offset = offset_arg(args.get("offset"))
    sort = "retry_count" if args.get("sort") == "retry_count" else "time"
    default_order = "desc" if sort == "retry_count" else info.default_order
    order = args.get("order") if args.get("order") in ("asc", "desc") else default_order
    reverse = order == "desc" if sort == "time" else order == "asc"
    wanted = job_filter(args)
    page = job_set.page(offset, limit, sort=sort, reverse=reverse, job_filter=wanted,
                        max_scan=DEFAULT_MAX_SCAN)
    return ctx.render(
        "set.html", kind=info, page=page, limit=limit, page_sizes=PAGE_SIZES,
        sort=sort, order=order, job_filter=wanted, filtered=not wanted.empty,
        actions=info.actions, action_labels=info.labels,
        size=page.total if wanted.empty else job_set.size(),
        pager=pager(page, limit, exact=wanted.empty or sort == "retry_count",
                    numbered=wanted.empty),
        query=query(args, "offset"),
    )


def set_action(ctx: Ctx, kind: str) -> Response:
    """``POST /<kind>``: an action on the selected entries (``key``), on one (``single`` =
    ``action:key``), or on every entry matching the filter (``scope=matching``)."""
    form = ctx.request.form
    job_set = ctx.api.job_set(kind)
    back = ctx.back(ctx.url_for("set_page", kind=kind))
    single = form.get("single", "")
    if single:
        action, _, key = single.partition(":")
        keys = [key]
    else:
        action = form.get("action", "")
        keys = form.getlist("key")
    if action not in SET_KINDS[kind].actions:
        raise BadRequest(f"the {job_set.name} set offers no action {action!r}")
    if form.get("scope") == "matching" and not single:
        result = job_set.apply_matching(action, job_filter(form), max_scan=None)
        raise Redirect(back, *outcome(result))
    if not keys:
        raise Redirect(back, "No job selected.", "warn")
    records, gone = _resolve(job_set, keys)
    result = job_set.apply(action, records)
    result.missing.extend(gone)
    raise Redirect(back, *outcome(result))


def set_job(ctx: Ctx, kind: str, key: str) -> Response:
    """``GET /<kind>/<key>``: one entry (404 when it has left the set)."""
    record = _find_entry(ctx.api.job_set(kind), key)
    info = SET_KINDS[kind]
    return ctx.render("job.html", kind=info, job=record, key=key,
                      actions=info.actions, action_labels=info.labels,
                      status=200 if record is not None else 404)


def set_job_action(ctx: Ctx, kind: str, key: str) -> Response:
    """``POST /<kind>/<key>``: an action on one entry."""
    job_set = ctx.api.job_set(kind)
    action = ctx.request.form.get("action", "")
    if action not in SET_KINDS[kind].actions:
        raise BadRequest(f"the {job_set.name} set offers no action {action!r}")
    record = _find_entry(job_set, key)
    back = ctx.url_for("set_page", kind=kind)
    if record is None:
        raise Redirect(back, "That job is no longer in the set.", "warn")
    raise Redirect(back, *outcome(job_set.apply(action, [record])))


def _resolve(job_set: JobSet, keys: list[str]) -> tuple[list[JobRecord], list[str]]:
    """Entries named by :func:`rfetch.web.formatting.entry_key`, and the keys no longer
    there."""
    records: list[JobRecord] = []
    gone: list[str] = []
    for key in dict.fromkeys(keys):
        record = _find_entry(job_set, key)
        if record is None:
            gone.append(key)
        else:
            records.append(record)
    return records, gone


def _find_entry(job_set: JobSet, key: str) -> JobRecord | None:
    parsed = parse_entry_key(key)
    if parsed is None:
        raise BadRequest(f"malformed job key {key!r}")
    score, wanted = parsed
    for record in job_set.at_score(score):
        if digest(record.raw) == wanted:
            return record
    return None
