"""The evidence checks of the multi-process limiter tests can fail: a synthetic run that
breaks the limit is caught."""

from __future__ import annotations

from tests.support.limiter_evidence import max_overlap, window_counts


def test_window_counts_catch_too_many_calls_in_a_window() -> None:
    calls = [(100.0 + i / 100, 100.0 + i / 100 + 0.001) for i in range(60)]
    report = window_counts(calls)
    assert report.worst() == 60 and report.straddling == 0


def test_window_counts_set_aside_calls_crossing_a_boundary() -> None:
    report = window_counts([(100.9, 101.1), (101.2, 101.3)])
    assert report.straddling == 1 and report.definite == {101: 1}


def test_max_overlap() -> None:
    assert max_overlap([(0, 2), (1, 3), (2, 4)]) == 2
    assert max_overlap([(0, 5), (1, 2), (1, 3), (1, 4)]) == 4
    assert max_overlap([]) == 0
