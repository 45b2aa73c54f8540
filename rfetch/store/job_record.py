"""One job's record for the Lua ending scripts: its per-job fields as ONE compact JSON text,
decoded once by ``rfetch/lua/lib/record.lua``, which also derives the keys the fields name
(``rfetch/lua/lib/keys.lua``). A script takes a record per job, never a positional argument
per field: a new per-job option is a field here, read by ``lib/record.lua`` and acted on by
``lib/outcome.lua``.

Fields (absent when the job has none): ``q`` the queue, ``jid``, ``key`` the ordering key,
``unique`` the unique lock's digest, ``tenant``, ``ck`` the fetch cap's concurrency key and
``limit`` its limit (a capped job only), ``bid`` the batch, ``ttl`` seconds to keep the
recorded outcome (``store_result``), ``class`` the class name (with ``ttl`` only: the
record keeps it), ``win`` the unique lock's
window in milliseconds (a push only), ``after`` the jid or bid a job waits on
(``depend.lua``, ``cancel_waiting.lua``). ``push.lua`` takes the same record for a job
through the gate.
"""

from __future__ import annotations

import json

from rfetch.jobs.payload import Routing

RECORD_FIELDS = (
    "q", "jid", "key", "unique", "tenant", "ck", "limit", "bid", "ttl", "class", "win", "after"
)
"""The record's fields, in ``lib/record.lua``'s ``RECORD_FIELDS`` order."""

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def job_record(
    queue: str, routing: Routing | None, window_ms: int | None = None, after: str | None = None
) -> str:
    """The record of a job of ``queue`` (str: the queue of the list holding it) with the
    routing fields ``routing`` (None: a job with no fields beyond its queue); ``window_ms``:
    its unique lock's window in milliseconds, for a push (``push.lua``); ``after``: the jid
    or bid it waits on (``depend.lua``, ``cancel_waiting.lua``)."""
    rec: dict[str, str | int] = {"q": queue}
    if routing is None:
        return _encode(rec)
    if routing.jid:
        rec["jid"] = routing.jid
    for name, value in (
        ("key", routing.ordering_key),
        ("unique", routing.unique),
        ("tenant", routing.tenant),
        ("ck", routing.concurrency_key if routing.capped else None),
        ("limit", routing.concurrency_limit if routing.capped else None),
        ("bid", routing.bid),
        ("ttl", routing.store_result),
        ("class", routing.job_class if routing.store_result else None),  # for its record
        ("win", window_ms if routing.unique is not None else None),
        ("after", after),
    ):
        if value:
            rec[name] = value
    return _encode(rec)


def needs_record(routing: Routing | None) -> bool:
    """Whether a job's end does more than take it out of its list: it has an ordering key, a
    unique lock, a fetch cap's slot or a batch (a plain acknowledgement is a bare LREM)."""
    return routing is not None and (routing.locking or routing.batched)
