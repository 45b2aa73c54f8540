"""The adaptive prefetch policy: how many jobs a process fetches ahead of its threads."""

from __future__ import annotations

from rfetch.worker.prefetch import PrefetchPolicy


def policy(concurrency: int = 10, prefetch: int = 10, horizon: float = 0.1) -> PrefetchPolicy:
    return PrefetchPolicy(concurrency, prefetch, horizon)


def test_before_any_job_has_finished_the_whole_prefetch_is_allowed() -> None:
    assert policy().allowance(ready=10) == 10


def test_short_jobs_keep_the_whole_prefetch() -> None:
    p = policy()
    for _ in range(20):
        p.finished(0.001)
    assert p.allowance(ready=10) == 10


def test_the_allowance_shrinks_with_the_run_time_and_vanishes_for_long_jobs() -> None:
    p = policy()
    p.finished(0.2)  # ten ready threads finish five such jobs within 0.1 s
    assert p.allowance(ready=10) == 5
    p = policy()
    p.finished(5.0)
    assert p.allowance(ready=10) == 0


def test_nothing_is_fetched_ahead_when_no_thread_is_ready_soon() -> None:
    p = policy()
    p.finished(0.001)
    assert p.allowance(ready=0) == 0
    assert policy(prefetch=0).allowance(ready=10) == 0


def test_ready_soon_counts_idle_threads_and_young_jobs() -> None:
    p = policy(concurrency=4)
    now = 100.0
    assert p.ready_soon([], now) == 4
    assert p.ready_soon([now - 0.05, now - 5.0], now) == 2 + 1
    assert p.ready_soon([now - 1.0] * 4, now) == 0


def test_waiting_jobs_go_back_only_when_every_thread_runs_an_old_job() -> None:
    p = policy()
    assert p.give_back(waiting=1, ready=0)
    assert not p.give_back(waiting=1, ready=1)
    assert not p.give_back(waiting=0, ready=0)


def test_the_mean_follows_recent_run_times() -> None:
    p = policy()
    p.finished(0.001)
    for _ in range(30):
        p.finished(1.0)
    assert p.mean is not None and 0.9 < p.mean <= 1.0
    assert p.allowance(ready=10) == 1
