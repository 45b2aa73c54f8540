"""The retry, scheduled and dead sets: a page of jobs, one job, and the actions on them.

With shards, the set page merges every shard that answers (:mod:`rfetch.api.shard_sets`)
and names each row's shard; a row's key is then ``<shard>:<entry key>``, so its action goes
to its shard. One job's page and its actions are on the shard given by ``?shard=``.
"""

from __future__ import annotations

from dataclasses import dataclass

from werkzeug.wrappers import Response

from rfetch.api import DEFAULT_MAX_SCAN, ActionResult, JobRecord, JobSet
from rfetch.api.durable import durable_lines, forget
from rfetch.api.shard_sets import add_results, merged_page

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


FROM_START = "retry_from_start"
"""The job page's action for a durable job: forget its cursor and step results, then retry
(the plain Retry resumes from them: "retry from here")."""


def set_page(ctx: Ctx, kind: str) -> Response:
    """``GET /<kind>``: a page of the set, by time or retry count, filtered."""
    args = ctx.request.args
    info = SET_KINDS[kind]
    limit = choice(args.get("limit"), PAGE_SIZES, 25)
    offset = offset_arg(args.get("offset"))
    sort = "retry_count" if args.get("sort") == "retry_count" else "time"
    default_order = "desc" if sort == "retry_count" else info.default_order
    order = args.get("order") if args.get("order") in ("asc", "desc") else default_order
    reverse = order == "desc" if sort == "time" else order == "asc"
    wanted = job_filter(args)
    shards = ctx.app.shards
    if shards is None:
        job_set = ctx.api.job_set(kind)
        page = job_set.page(offset, limit, sort=sort, reverse=reverse, job_filter=wanted,
                            max_scan=DEFAULT_MAX_SCAN)
        job_shards: list[str] = []
        size = page.total if wanted.empty else job_set.size()
    else:
        names = shards.names()
        sets = [(names[i], shards.shard(i).job_set(kind)) for i in ctx.up()]
        page, job_shards = merged_page(sets, offset, limit, sort=sort, reverse=reverse,
                                       job_filter=wanted, max_scan=DEFAULT_MAX_SCAN)
        size = page.total if wanted.empty else sum(one.size() for _, one in sets)
    return ctx.render(
        "set.html", kind=info, page=page, limit=limit, page_sizes=PAGE_SIZES,
        sort=sort, order=order, job_filter=wanted, filtered=not wanted.empty,
        actions=info.actions, action_labels=info.labels, job_shards=job_shards,
        size=size,
        pager=pager(page, limit, exact=wanted.empty or sort == "retry_count",
                    numbered=wanted.empty),
        query=query(args, "offset"),
    )


def set_action(ctx: Ctx, kind: str) -> Response:
    """``POST /<kind>``: an action on the selected entries (``key``), on one (``single`` =
    ``action:key``), or on every entry matching the filter (``scope=matching``)."""
    form = ctx.request.form
    back = ctx.back(ctx.url_for("set_page", kind=kind))
    single = form.get("single", "")
    if single:
        action, _, key = single.partition(":")
        keys = [key]
    else:
        action = form.get("action", "")
        keys = form.getlist("key")
    if action not in SET_KINDS[kind].actions:
        raise BadRequest(f"the {SET_KINDS[kind].title.lower()} set offers no action "
                         f"{action!r}")
    shards = ctx.app.shards
    job_sets: dict[int | None, JobSet] = (
        {None: ctx.api.job_set(kind)} if shards is None
        else {i: shards.shard(i).job_set(kind) for i in ctx.up()}
    )
    if form.get("scope") == "matching" and not single:
        results = [one.apply_matching(action, job_filter(form), max_scan=None)
                   for one in job_sets.values()]
        raise Redirect(back, *outcome(add_results(action, results)))
    if not keys:
        raise Redirect(back, "No job selected.", "warn")
    results = []
    for shard, shard_keys in _by_shard(keys, sharded=shards is not None).items():
        job_set = job_sets.get(shard)
        if job_set is None:  # its shard is down (or gone): nothing done there
            results.append(ActionResult(action, missing=shard_keys))
            continue
        records, gone = _resolve(job_set, shard_keys)
        result = job_set.apply(action, records)
        result.missing.extend(gone)
        results.append(result)
    raise Redirect(back, *outcome(add_results(action, results)))


def _by_shard(keys: list[str], sharded: bool) -> dict[int | None, list[str]]:
    """Entry keys grouped by shard: ``<shard>:<entry key>`` with shards, else all under
    None.

    Raises:
        BadRequest: with shards, a key without its shard.
    """
    if not sharded:
        return {None: keys}
    groups: dict[int | None, list[str]] = {}
    for key in keys:
        shard, sep, entry = key.partition(":")
        if not sep or not shard.isdigit():
            raise BadRequest(f"job key {key!r} does not name its shard")
        groups.setdefault(int(shard), []).append(entry)
    return groups


def set_job(ctx: Ctx, kind: str, key: str) -> Response:
    """``GET /<kind>/<key>[?jid=J]``: one entry.

    An entry that has left the set (retried, run, killed, or failed again and stored anew)
    is followed by its jid when the link gave one: a redirect to "Find a job", which says
    where the job is now (a queue, a set, running) or that it is no longer held. Without
    a jid: 404.
    """
    record = _find_entry(ctx.api.job_set(kind), key)
    info = SET_KINDS[kind]
    jid = (ctx.request.args.get("jid") or "").strip()
    if record is None and jid:
        raise Redirect(ctx.url_for("explain", jid=jid),
                       f"Job {jid} is no longer at that place in the {info.title.lower()} "
                       "set: here is where it is now.", "warn")
    durable = durable_lines(ctx.api.ctx, record.jid) if record and record.jid else []
    return ctx.render("job.html", kind=info, job=record, key=key,
                      actions=info.actions, action_labels=info.labels, durable=durable,
                      status=200 if record is not None else 404)


def set_job_action(ctx: Ctx, kind: str, key: str) -> Response:
    """``POST /<kind>/<key>``: an action on one entry."""
    job_set = ctx.api.job_set(kind)
    action = ctx.request.form.get("action", "")
    from_start = action == FROM_START and "retry" in SET_KINDS[kind].actions
    if from_start:
        action = "retry"
    if action not in SET_KINDS[kind].actions:
        raise BadRequest(f"the {job_set.name} set offers no action {action!r}")
    record = _find_entry(job_set, key)
    back = ctx.url_for("set_page", kind=kind)
    if record is None:
        raise Redirect(back, "That job is no longer in the set.", "warn")
    if from_start and record.jid:
        forget(ctx.api.ctx, record.jid)  # a durable job: no cursor, no recorded step
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
