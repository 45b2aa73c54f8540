"""The scores of a queue's priority set ``rfetch:prio:<q>`` (``rfetch/lua/lib/priority.lua``
writes them; ``tests/unit/test_priority_score.py`` checks the two agree): for the API's
run order and for reading a job's priority from its score.

A job of priority ``p`` (-100..100, not 0) pushed with the queue's sequence number ``seq``
scores ``(100 - p) * 2**44 + 2**43 + seq``; put back (push-back, orphan recovery) it scores
``... + 2**43 - seq``, first of its priority. The lowest score is fetched first. Scores
below :data:`ABOVE_LIST_SCORE` are those of jobs of priority > 0, fetched before the list's.
"""

from __future__ import annotations

from rfetch.jobs.options import MAX_PRIORITY

BAND = 2**44
"""The score span of one priority."""

HALF = 2**43
"""A band's middle: new jobs above it, put-back jobs below it."""

ABOVE_LIST_SCORE = MAX_PRIORITY * BAND
"""Scores below this are of jobs of priority > 0 (run before the list ``queue:<q>``)."""


def priority_score(priority: int, seq: int, at_head: bool = False) -> int:
    """The score of a job of ``priority`` with sequence number ``seq`` (>= 1), put back
    first of its priority with ``at_head``.

    Raises:
        ValueError: a priority out of -100..100 or 0, or a sequence number out of range.
    """
    if not -MAX_PRIORITY <= priority <= MAX_PRIORITY or priority == 0:
        raise ValueError(f"priority must be from -100 to 100 and not 0, got {priority}")
    if not 1 <= seq < HALF:
        raise ValueError(f"sequence number must be from 1 to 2**43 - 1, got {seq}")
    return (MAX_PRIORITY - priority) * BAND + HALF + (-seq if at_head else seq)


def score_priority(score: float) -> int:
    """The priority of a job of the priority set from its score."""
    return MAX_PRIORITY - int(score // BAND)
