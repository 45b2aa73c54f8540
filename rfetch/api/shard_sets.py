"""The retry, scheduled and dead sets of several shards as one (``Config.shards``).

A page of the merged set is built from the first ``offset + limit`` entries of each shard,
in the order asked for, merged in that order: the same jobs, in the same order, as one set
holding them all would give (ties between shards go to the lower shard index). Actions name
their shard, so an action on merged rows is split by shard and the results added up.
"""

from __future__ import annotations

from collections.abc import Sequence

from .job_filter import JobFilter
from .records import ActionResult, JobRecord, Page
from .sets import JobSet


def merged_page(
    sets: Sequence[tuple[str, JobSet]],
    offset: int = 0,
    limit: int = 25,
    *,
    sort: str = "time",
    reverse: bool = False,
    job_filter: JobFilter | None = None,
    max_scan: int | None = None,
) -> tuple[Page, list[str]]:
    """One page over several shards' copies of one set.

    Args:
        sets: (shard name, that shard's set), in shard order.
        offset, limit, sort, reverse, job_filter, max_scan: as :meth:`JobSet.page` (per
            shard for ``max_scan``).

    Returns:
        The page (``total`` and ``scanned`` summed; ``complete`` only if every shard's
        was) and, for each of its jobs, the name of the shard it is on.

    Raises:
        ValueError: as :meth:`JobSet.page`.
    """
    keep = offset + limit
    pages = [
        (name, job_set.page(0, keep, sort=sort, reverse=reverse, job_filter=job_filter,
                            max_scan=max_scan))
        for name, job_set in sets
    ]
    rows = [(name, job) for name, page in pages for job in page.jobs]
    if sort == "retry_count":
        # Most retried first, ties by earlier score; with ``reverse`` the whole order
        # turned round (fewest first, ties by later score), as JobSet.page orders them.
        def count(row: tuple[str, JobRecord]) -> int:
            job = row[1]
            return job.retry_count if job.retry_count is not None else -1

        rows.sort(key=lambda row: row[1].score or 0.0, reverse=reverse)
        rows.sort(key=count, reverse=not reverse)
    else:
        rows.sort(key=lambda row: row[1].score or 0.0, reverse=reverse)
    chosen = rows[offset:keep]
    more = len(rows) > keep or any(page.next_offset is not None for _, page in pages)
    page = Page(
        jobs=[job for _, job in chosen],
        total=sum(p.total for _, p in pages),
        offset=offset,
        next_offset=keep if more else None,
        scanned=sum(p.scanned for _, p in pages),
        complete=all(p.complete for _, p in pages),
    )
    return page, [name for name, _ in chosen]


def add_results(action: str, results: Sequence[ActionResult]) -> ActionResult:
    """One result for an action done shard by shard."""
    total = ActionResult(action)
    for result in results:
        total.done += result.done
        total.missing.extend(result.missing)
        total.skipped.extend(result.skipped)
        total.scanned += result.scanned
        total.complete = total.complete and result.complete
    return total
