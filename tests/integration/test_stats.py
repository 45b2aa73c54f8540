"""Counters and per-class metrics flushed by the heartbeat."""

from __future__ import annotations

import time

import redis

from rfetch.observability.stats import BUCKETS_MS, Stats
from rfetch.store.keys import Keys


def flush(stats: Stats, r: redis.Redis) -> None:
    pipe = r.pipeline()
    stats.queue_flush(pipe, stats.take())
    pipe.execute()


def test_flush_writes_sidekiq_counters_and_minute_metrics(r: redis.Redis) -> None:
    keys = Keys()
    stats = Stats(keys)
    stats.record("app.A", False, 0.4)
    stats.record("app.A", True, 15.0)
    stats.record("app.B", False, 4_000_000.0)
    flush(stats, r)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert r.get("stat:processed") == b"3" and r.get("stat:failed") == b"1"
    assert r.get(f"stat:processed:{day}") == b"3" and r.get(f"stat:failed:{day}") == b"1"
    [key] = [k for k in r.keys("rfetch:metrics:*") if k != b"rfetch:metrics:totals"]
    fields = {k.decode(): int(v) for k, v in r.hgetall(key).items()}
    assert fields == {
        "app.A|p": 2,
        "app.A|f": 1,
        "app.A|b0": 1,  # 0.4 ms <= 1 ms
        f"app.A|b{BUCKETS_MS.index(20)}": 1,  # 15 ms in (10, 20]
        "app.B|p": 1,
        f"app.B|b{len(BUCKETS_MS)}": 1,  # beyond the last bound
    }
    assert 0 < r.ttl(key) <= 7200


def test_nothing_is_written_when_idle_and_failed_flush_is_kept(r: redis.Redis) -> None:
    stats = Stats(Keys("ns"))
    flush(stats, r)
    assert r.dbsize() == 0
    stats.record("X", False, 1.0)
    stats.give_back(stats.take())  # a flush that failed
    stats.record("X", True, 1.0)
    flush(stats, r)
    assert r.get("ns:stat:processed") == b"2" and r.get("ns:stat:failed") == b"1"
