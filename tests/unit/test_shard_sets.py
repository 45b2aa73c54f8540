"""Merging the pages of several shards' sets (``rfetch.api.shard_sets``), on stand-in sets
that answer ``page`` as :meth:`rfetch.api.JobSet.page` does (no Redis)."""

from __future__ import annotations

import json
from typing import Any, cast

from rfetch.api import ActionResult, JobRecord, JobSet, Page
from rfetch.api.shard_sets import add_results, merged_page


def job(jid: str, score: float, retries: int) -> JobRecord:
    raw = json.dumps({"class": "X", "args": [], "jid": jid, "retry_count": retries})
    return JobRecord.parse(raw, "retry", score)


class StandInSet:
    """``page`` over a list, ordered as JobSet orders a set."""

    def __init__(self, jobs: list[JobRecord]) -> None:
        self.jobs = jobs

    def page(self, offset: int, limit: int, *, sort: str, reverse: bool, **_: Any) -> Page:
        if sort == "time":
            ordered = sorted(self.jobs, key=lambda j: j.score or 0.0, reverse=reverse)
        else:
            ordered = sorted(self.jobs, key=lambda j: ((j.retry_count or 0), -(j.score or 0.0)),
                             reverse=True)
            if reverse:
                ordered.reverse()
        chosen = ordered[offset:offset + limit]
        more = offset + limit < len(ordered)
        return Page(chosen, len(ordered), offset, offset + limit if more else None,
                    len(ordered))


def shards() -> list[tuple[str, JobSet]]:
    first = StandInSet([job("a1", 1.0, 0), job("a3", 3.0, 5), job("a5", 5.0, 1)])
    second = StandInSet([job("b2", 2.0, 5), job("b4", 4.0, 0)])
    return [("0", cast(JobSet, first)), ("1", cast(JobSet, second))]


def jids(page: Page) -> list[str | None]:
    return [j.jid for j in page.jobs]


def test_pages_merge_in_time_order_naming_each_jobs_shard() -> None:
    page, names = merged_page(shards(), 0, 10)
    assert jids(page) == ["a1", "b2", "a3", "b4", "a5"]
    assert names == ["0", "1", "0", "1", "0"]
    assert (page.total, page.next_offset) == (5, None)
    latest, _ = merged_page(shards(), 0, 2, reverse=True)
    assert jids(latest) == ["a5", "b4"]
    assert latest.next_offset == 2


def test_offsets_page_through_the_merged_order() -> None:
    first, _ = merged_page(shards(), 0, 2)
    second, names = merged_page(shards(), 2, 2)
    third, _ = merged_page(shards(), 4, 2)
    assert jids(first) + jids(second) + jids(third) == ["a1", "b2", "a3", "b4", "a5"]
    assert names == ["0", "1"]
    assert third.next_offset is None


def test_retry_count_order_matches_one_set() -> None:
    page, _ = merged_page(shards(), 0, 10, sort="retry_count")
    assert jids(page) == ["b2", "a3", "a5", "a1", "b4"]  # 5 (earlier first), 5, 1, 0, 0
    fewest, _ = merged_page(shards(), 0, 10, sort="retry_count", reverse=True)
    assert jids(fewest) == list(reversed(jids(page)))


def test_results_add_up() -> None:
    one = ActionResult("retry", done=2, missing=["x"], scanned=3)
    two = ActionResult("retry", done=1, skipped=["(invalid)"], scanned=4, complete=False)
    total = add_results("retry", [one, two])
    assert (total.done, total.missing, total.skipped, total.scanned, total.complete) == (
        3, ["x"], ["(invalid)"], 7, False,
    )
