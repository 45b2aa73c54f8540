"""Reading a limiter's hash for the API, the page and the metrics (no Redis: the hash is
given as Redis returns it)."""

from __future__ import annotations

from rfetch.api.limiters import parse_limiter

NOW = 1_763_950_000_500.0  # Redis time, ms


def test_window_counts_only_the_current_window() -> None:
    raw = {b"kind": b"window", b"limit": b"50", b"period": b"1000", b"w": b"1763950000",
           b"n": b"42", b"calls": b"900", b"overlimit": b"7", b"waited": b"3", b"wait_ms": b"1500"}
    info = parse_limiter("stripe", raw, NOW, 5000)
    assert (info.in_use, info.capacity, info.period, info.ttl) == (42, 50, 1.0, 5.0)
    assert (info.calls, info.overlimit, info.waited, info.wait_seconds) == (900, 7, 3, 1.5)
    stale = parse_limiter("stripe", {**raw, b"w": b"1763949999"}, NOW, 5000)
    assert stale.in_use == 0


def test_rate_kinds_read_the_bucket_level_from_tat() -> None:
    raw = {b"kind": b"bucket", b"limit": b"10", b"period": b"1000", b"capacity": b"10",
           b"tat": str(NOW + 350).encode()}
    assert parse_limiter("mail", raw, NOW, -1).in_use == 4  # 100 ms per unit: 3.5 -> 4
    assert parse_limiter("mail", raw, NOW, -1).ttl is None
    leaky = {**raw, b"kind": b"leaky", b"capacity": b"1", b"tat": str(NOW - 5).encode()}
    info = parse_limiter("partner", leaky, NOW, 100)
    assert (info.in_use, info.capacity) == (0, 1)


def test_concurrent_lists_locks_live_and_expired() -> None:
    raw = {b"kind": b"concurrent", b"limit": b"3", b"period": b"0", b"lock_timeout": b"30000",
           b"l:aaa": f"{NOW + 20_000:.3f} web-1:42:Thread-3".encode(),
           b"l:bbb": f"{NOW - 1_000:.3f} web-2:7:MainThread".encode(), b"reclaimed": b"2"}
    info = parse_limiter("erp", raw, NOW, 1000)
    assert (info.in_use, info.lock_timeout, info.reclaimed) == (1, 30.0, 2)
    assert [(lock.token, lock.holder, lock.expires_in) for lock in info.locks] == [
        ("bbb", "web-2:7:MainThread", -1.0), ("aaa", "web-1:42:Thread-3", 20.0)]


def test_malformed_fields_read_as_zero() -> None:
    info = parse_limiter("x", {b"kind": b"window", b"limit": b"lots", b"calls": b"many"}, NOW, 1)
    assert (info.limit, info.calls, info.in_use) == (1, 0, 0)
    odd = parse_limiter("y", {b"kind": b"concurrent", b"l:t": b"soon someone"}, NOW, 1)
    assert (odd.in_use, odd.locks[0].expires_in) == (0, 0.0)
