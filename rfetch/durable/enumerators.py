"""Ready enumerators for :class:`rfetch.IterableJob.build_enumerator` (Sidekiq 7.3's
``Sidekiq::Job::Iterable::Enumerators``): each yields ``(item, cursor)`` pairs, and given
the cursor of the last item done it yields the items after it.

Every cursor here is native JSON (an int, a list), as ``it-<jid>`` keeps it.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any


def range_enumerator(start: int, stop: int, step: int = 1, *,
                     cursor: int | None) -> Iterator[tuple[int, int]]:
    """``range(start, stop, step)``: each number is its own cursor.

    Raises:
        ValueError: ``step`` is 0.
    """
    first = start if cursor is None else cursor + step
    for number in range(first, stop, step):
        yield number, number


def list_enumerator(items: Sequence[Any], *, cursor: int | None) -> Iterator[tuple[Any, int]]:
    """The items of a list; the cursor is the index (Sidekiq's ``array_enumerator``)."""
    first = 0 if cursor is None else cursor + 1
    for index in range(first, len(items)):
        yield items[index], index


def id_windows(first: int, last: int, size: int, *,
               cursor: int | None) -> Iterator[tuple[tuple[int, int], int]]:
    """Windows ``(lo, hi)`` of ids, ``hi - lo + 1 == size`` (the last may be shorter),
    covering ``first..last`` inclusive; the cursor is the window's ``hi``: a job that does
    one window per item (``WHERE id BETWEEN lo AND hi``).

    Raises:
        ValueError: ``size`` below 1.
    """
    if size < 1:
        raise ValueError(f"id_windows: size must be at least 1, got {size}")
    lo = first if cursor is None else cursor + 1
    while lo <= last:
        hi = min(lo + size - 1, last)
        yield (lo, hi), hi
        lo = hi + 1


def csv_enumerator(path: str | Path, *, cursor: int | None,
                   encoding: str = "utf-8") -> Iterator[tuple[dict[str, str], int]]:
    """The rows of a CSV file with a header line, as dicts; the cursor is the row number
    (0-based, after the header). A resumed walk re-reads the rows before the cursor (a
    CSV file has no index) but runs none of them."""
    with open(path, newline="", encoding=encoding) as handle:
        for number, row in enumerate(csv.DictReader(handle)):
            if cursor is None or number > cursor:
                yield row, number


def keyset_enumerator(fetch: Callable[[Any, int], Sequence[Any]], key: Callable[[Any], Any],
                      batch_size: int, *, cursor: Any) -> Iterator[tuple[Any, Any]]:
    """Rows walked by a unique, ordered key in batches (keyset pagination): ``fetch(after,
    limit)`` returns up to ``limit`` rows whose key is greater than ``after`` (every row when
    ``after`` is None) in key order; ``key(row)`` is a row's key, its cursor (so it must be
    native JSON: an int or str primary key)."""
    after = cursor
    while True:
        rows = fetch(after, batch_size)
        for row in rows:
            after = key(row)
            yield row, after
        if len(rows) < batch_size:
            return


def queryset_enumerator(queryset: Any, *, cursor: Any, batch_size: int = 1000,
                        key: str = "pk") -> Iterator[tuple[Any, Any]]:
    """A Django queryset walked by ``key`` (default the primary key) in batches of
    ``batch_size`` (``filter(pk__gt=cursor).order_by("pk")[:batch_size]``); the cursor is
    the row's key."""

    def fetch(after: Any, limit: int) -> Sequence[Any]:
        rows = queryset if after is None else queryset.filter(**{f"{key}__gt": after})
        return list(rows.order_by(key)[:limit])

    return keyset_enumerator(fetch, lambda row: getattr(row, key), batch_size, cursor=cursor)


def select_enumerator(session: Any, select: Any, column: Any, *, cursor: Any,
                      batch_size: int = 1000) -> Iterator[tuple[Any, Any]]:
    """A SQLAlchemy ``select`` of ORM rows walked by ``column`` (a unique, ordered column,
    e.g. ``User.id``) in batches through ``session`` (``where(column > cursor)
    .order_by(column).limit(batch_size)``); the cursor is the row's value of ``column``."""
    name = column.key

    def fetch(after: Any, limit: int) -> Sequence[Any]:
        query = select if after is None else select.where(column > after)
        return list(session.scalars(query.order_by(column).limit(limit)))

    return keyset_enumerator(fetch, lambda row: getattr(row, name), batch_size, cursor=cursor)


def nested_enumerator(
    outer: Callable[[Any], Iterable[tuple[Any, Any]]],
    inner: Callable[[Any, Any], Iterable[tuple[Any, Any]]],
    *,
    cursor: list[Any] | None,
) -> Iterator[tuple[Any, list[Any]]]:
    """For each outer item, the items of ``inner(outer_item, inner_cursor)``; ``outer(c)``
    yields the outer items after cursor ``c``. The cursor is ``[c, inner cursor]`` where
    ``c`` is the outer cursor *before* the current outer item (so a resumed walk gets that
    item again and goes on inside it). Yields ``(inner item, cursor)``."""
    before, inner_cursor = (None, None) if cursor is None else (cursor[0], cursor[1])
    for outer_item, outer_cursor in outer(before):
        for item, item_cursor in inner(outer_item, inner_cursor):
            yield item, [before, item_cursor]
        before, inner_cursor = outer_cursor, None
