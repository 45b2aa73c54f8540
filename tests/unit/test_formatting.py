"""rfetch.formatting words counts, durations and sizes through ``humanize``."""

from __future__ import annotations

from rfetch import formatting


def test_numbers_durations_and_sizes_read_as_words() -> None:
    assert formatting.number(1234567) == "1,234,567"
    assert formatting.number(2.5) == "2.5"
    assert formatting.number(None) == formatting.DASH
    assert formatting.duration(2_591_946) == "29 days"  # a batch's month-long TTL
    assert formatting.duration(-42) == "42 seconds"
    assert formatting.duration(4.2, tenths_below=10) == "4.2 seconds"
    assert formatting.duration(7200) == "2 hours"
    assert formatting.relative(1_000 + 2_591_946, 1_000) == "in 29 days"
    assert formatting.relative(0, 86_400) == "a day ago"
    assert formatting.relative(100.5, 100, tenths_below=10) == "now"
    assert formatting.memory(12.3 * 1024 * 1024) == "12.3 MiB"
    assert formatting.memory(None) == formatting.DASH
