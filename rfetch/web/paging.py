"""Query arguments of list pages, read and bounded, and the links between pages.

Every number a request gives (offset, page size, days, minutes) is parsed here and kept
inside a range, so no argument can reach Redis as an out-of-range integer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from werkzeug.datastructures import MultiDict

from rfetch.api import JobFilter, Page

_INTEGER = re.compile(r"([+-]?)([0-9]+)")

PAGE_SIZES = (25, 50, 100, 200)
"""Jobs per page a list page offers."""

MAX_OFFSET = 1_000_000_000
"""Largest offset a list page accepts; beyond it the request asks for the last possible page
(Redis list and set indexes are 64-bit, and no queue holds a billion jobs)."""


def choice(text: str | None, choices: tuple[int, ...], default: int) -> int:
    """``text`` as one of ``choices``, else ``default`` (missing, not a number, not offered)."""
    value = bounded_int(text, default, -1, max(choices) + 1)
    return value if value in choices else default


def bounded_int(text: str | None, default: int, low: int, high: int) -> int:
    """``text`` as a whole number clamped to ``[low, high]`` (however many digits it has);
    ``default`` when it is missing or not a decimal number."""
    found = _INTEGER.fullmatch((text or "").strip())
    if found is None:
        return default
    sign, digits = found.groups()
    if len(digits) > 18:  # beyond any bound; not parsed
        return low if sign == "-" else high
    return min(max(int(sign + digits), low), high)


def offset_arg(text: str | None) -> int:
    """A page's ``offset`` argument: 0 when missing or malformed, clamped to
    ``[0, MAX_OFFSET]``."""
    return bounded_int(text, 0, 0, MAX_OFFSET)


def job_filter(values: MultiDict[str, str]) -> JobFilter:
    """The ``class`` and ``grep`` fields of a query or form as a :class:`JobFilter`."""
    job_class = (values.get("class") or "").strip() or None
    grep = (values.get("grep") or "").strip() or None
    return JobFilter(job_class, grep)


def query(args: MultiDict[str, str], *without: str) -> dict[str, str]:
    """The page's query arguments minus ``without`` (for links that change one of them)."""
    return {k: v for k, v in args.items() if k not in without and v != ""}


@dataclass(frozen=True)
class Pager:
    """Links of a page: offsets of the first, previous and next pages, and page numbers."""

    first: int | None
    prev: int | None
    next: int | None
    shown_from: int
    shown_to: int
    numbers: list[tuple[int | None, int]]
    current: int


def pager(page: Page, limit: int, exact: bool, numbered: bool | None = None) -> Pager:
    """Paging links.

    Args:
        page: the page shown.
        limit: jobs per page.
        exact: offsets count the jobs listed (unfiltered, or sorted by retry count), so the
            previous page's offset is known; a filtered scan only knows where the next
            page starts.
        numbered: show page numbers (default: ``exact``); they need ``page.total`` to count
            the jobs listed, which is not so for a filtered listing.
    """
    offset = page.offset
    prev = max(0, offset - limit) if exact and offset > 0 else None
    numbers: list[tuple[int | None, int]] = []
    current = offset // limit + 1
    if (exact if numbered is None else numbered) and page.total > limit:
        last = (page.total - 1) // limit + 1
        wanted = sorted({1, 2, last - 1, last, *range(current - 2, current + 3)})
        previous = 0
        for n in wanted:
            if n < 1 or n > last:
                continue
            if n - previous > 1:
                numbers.append((None, 0))
            numbers.append((n, (n - 1) * limit))
            previous = n
    return Pager(
        first=0 if offset > 0 else None,
        prev=prev,
        next=page.next_offset,
        shown_from=offset + 1 if page.jobs else 0,
        shown_to=offset + len(page.jobs),
        numbers=numbers,
        current=current,
    )
