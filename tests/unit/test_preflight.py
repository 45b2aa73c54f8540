"""The start-up warnings about Redis settings that break the guarantees (no Redis)."""

from __future__ import annotations

from rfetch.worker.preflight import eviction_warning, persistence_warning


def test_eviction_policies_other_than_noeviction_are_warned_about() -> None:
    assert eviction_warning("noeviction") is None
    for policy in ("allkeys-lru", "volatile-lru", "allkeys-random", "volatile-ttl"):
        warning = eviction_warning(policy)
        assert warning is not None and policy in warning and "noeviction" in warning


def test_no_persistence_is_warned_about() -> None:
    assert persistence_warning("yes", "") is None
    assert persistence_warning("no", "3600 1 300 100 60 10000") is None
    warning = persistence_warning("no", "")
    assert warning is not None and "no persistence" in warning
