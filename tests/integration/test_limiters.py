"""Limiters against a real Redis: each kind's grants, waits, OverLimit and counters, the
concurrent kind's reclaim and renewal, the key guard, namespaces and asyncio."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.errors import ConfigError, LimiterKeyError, OverLimit
from tests.support.aio import run_async


@pytest.fixture
def client(config: Config) -> rfetch.Client:
    return rfetch.Client(config)


def _count_granted(limiter: rfetch.Limiter, n: int) -> int:
    granted = 0
    for _ in range(n):
        try:
            with limiter.within_limit():
                granted += 1
        except OverLimit:
            pass
    return granted


def test_window_grants_limit_then_over_limit_without_wait(
    client: rfetch.Client, r: redis.Redis
) -> None:
    limiter = rfetch.Limiter.window("w1", 5, per="day", wait_timeout=0, client=client)
    assert _count_granted(limiter, 8) == 5
    h = r.hgetall("rfetch:limiter:w1")
    assert h[b"kind"] == b"window" and h[b"limit"] == b"5" and h[b"period"] == b"86400000"
    assert h[b"n"] == b"5" and h[b"calls"] == b"5" and h[b"overlimit"] == b"3"
    assert b"waited" not in h  # a first attempt never counts as a wait
    assert r.smembers("rfetch:limiters") == {b"w1"}
    assert 0 < r.pttl("rfetch:limiter:w1") <= 90 * 86400 * 1000


def test_window_waits_for_the_next_window(client: rfetch.Client, r: redis.Redis) -> None:
    limiter = rfetch.Limiter.window("w2", 2, per=0.5, wait_timeout=3, client=client)
    windows = []
    for _ in range(6):
        with limiter.within_limit() as grant:
            windows.append(int(grant.redis_ms // 500))
    assert max(windows.count(w) for w in set(windows)) <= 2
    assert len(set(windows)) >= 3
    assert int(r.hget("rfetch:limiter:w2", "waited") or 0) >= 1


def test_window_over_limit_when_the_wait_exceeds_wait_timeout(client: rfetch.Client) -> None:
    limiter = rfetch.Limiter.window("w3", 1, per=86400, wait_timeout=60, client=client)
    with limiter.within_limit() as grant:
        pass
    left = 86400 - grant.redis_ms / 1000 % 86400
    if left < 65:  # the window turns within wait_timeout: start in the next one
        time.sleep(left + 0.1)
        with limiter.within_limit():
            pass
    started = time.monotonic()
    with pytest.raises(OverLimit) as info, limiter.within_limit():
        pass
    # The script said so at once: no useless sleep up to the 60 s wait_timeout.
    assert time.monotonic() - started < 30
    assert info.value.name == "w3" and info.value.kind == "window"


def test_bucket_bursts_then_refills(client: rfetch.Client) -> None:
    limiter = rfetch.Limiter.bucket("b1", 4, per=4, wait_timeout=0, client=client)
    started = time.monotonic()
    # A full bucket of 4, and a token back for each second the calls took (none unless slow).
    assert 4 <= _count_granted(limiter, 6) <= 4 + int(time.monotonic() - started)
    time.sleep(2.2)  # one token per second comes back: at least two by now
    granted = _count_granted(limiter, 6)
    assert 2 <= granted <= min(4, int(time.monotonic() - started) + 1)


def test_leaky_spaces_calls(client: rfetch.Client) -> None:
    limiter = rfetch.Limiter.leaky("l1", 10, per=1, wait_timeout=2, client=client)
    stamps = []
    for _ in range(5):
        with limiter.within_limit() as grant:
            stamps.append(grant.redis_ms)
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    assert min(gaps) >= 99.0  # 100 ms apart, by Redis's clock


def test_points_take_their_cost(client: rfetch.Client, r: redis.Redis) -> None:
    limiter = rfetch.Limiter.points("p1", 100, per=60, wait_timeout=0, client=client)
    with limiter.within_limit(cost=60) as grant:
        assert grant.used == 60
    with pytest.raises(OverLimit), limiter.within_limit(cost=50):
        pass
    with limiter.within_limit(cost=40):
        pass
    with pytest.raises(ConfigError), limiter.within_limit(cost=101):
        pass
    window = rfetch.Limiter.window("w", 3, client=client)
    with pytest.raises(ConfigError), window.within_limit(cost=2):
        pass


def test_concurrent_limits_holders_and_releases(client: rfetch.Client, r: redis.Redis) -> None:
    limiter = rfetch.Limiter.concurrent("c1", 2, lock_timeout=30, wait_timeout=0, client=client)
    with limiter.within_limit() as one, limiter.within_limit() as two:
        assert {one.used, two.used} == {1, 2}
        with pytest.raises(OverLimit), limiter.within_limit():
            pass
        locks = [f for f in r.hkeys("rfetch:limiter:c1") if f.startswith(b"l:")]
        assert len(locks) == 2
    assert not [f for f in r.hkeys("rfetch:limiter:c1") if f.startswith(b"l:")]
    with limiter.within_limit():
        pass


def test_concurrent_waiter_gets_a_released_lock(client: rfetch.Client) -> None:
    limiter = rfetch.Limiter.concurrent("c2", 1, lock_timeout=300, wait_timeout=120,
                                        client=client)
    holding = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with limiter.within_limit():
            holding.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(60)
    threading.Timer(0.3, release.set).start()
    started = time.monotonic()
    with limiter.within_limit() as grant:
        assert grant.waited >= 0.2
    assert time.monotonic() - started < 60  # well before wait_timeout: the release was seen
    thread.join()


def test_concurrent_lock_of_a_stopped_renewer_is_reclaimed_after_lock_timeout(
    client: rfetch.Client, r: redis.Redis
) -> None:
    limiter = rfetch.Limiter.concurrent("c3", 1, lock_timeout=1, wait_timeout=0, client=client)
    grant = limiter.acquire()
    # The holder's process dies: nobody renews (and nobody releases) the lock.
    assert limiter._keeper is not None
    limiter._keeper.discard(grant.token or "")
    other = rfetch.Limiter.concurrent("c3", 1, lock_timeout=1, wait_timeout=0, client=client)
    with pytest.raises(OverLimit), other.within_limit():
        pass
    time.sleep(1.1)
    with other.within_limit():
        pass
    assert r.hget("rfetch:limiter:c3", "reclaimed") == b"1"


def test_concurrent_live_holder_keeps_its_lock_past_lock_timeout(
    client: rfetch.Client,
) -> None:
    limiter = rfetch.Limiter.concurrent("c4", 1, lock_timeout=1.5, wait_timeout=0, client=client)
    other = rfetch.Limiter.concurrent("c4", 1, lock_timeout=1.5, wait_timeout=0, client=client)
    with limiter.within_limit():
        for _ in range(5):  # 5 s: more than three lock_timeouts, renewed meanwhile
            time.sleep(1)
            with pytest.raises(OverLimit), other.within_limit():
                pass
    with other.within_limit():
        pass


def test_wrong_key_type_is_an_error_naming_the_key(client: rfetch.Client, r: redis.Redis) -> None:
    r.set("rfetch:limiter:bad", "x")
    limiter = rfetch.Limiter.window("bad", 5, client=client)
    with pytest.raises(LimiterKeyError, match="rfetch:limiter:bad"), limiter.within_limit():
        pass
    assert r.get("rfetch:limiter:bad") == b"x"
    r.delete("rfetch:limiter:bad")
    r.set("rfetch:limiters", "x")
    other = rfetch.Limiter.concurrent("ok", 1, client=client)
    with pytest.raises(LimiterKeyError, match="rfetch:limiters"), other.within_limit():
        pass


def test_namespace_puts_keys_under_the_tag(config: Config, r: redis.Redis) -> None:
    client = rfetch.Client(config.replace(namespace="{app}"))
    with rfetch.Limiter.bucket("ns", 3, client=client).within_limit():
        pass
    assert r.exists("{app}:rfetch:limiter:ns") and r.exists("{app}:rfetch:limiters")


def test_async_within_limit(client: rfetch.Client) -> None:
    limiter = rfetch.Limiter.concurrent("a1", 1, lock_timeout=10, wait_timeout=3, client=client)
    order: list[str] = []

    async def task(name: str) -> None:
        async with limiter.within_limit():
            order.append(f"in {name}")
            await asyncio.sleep(0.1)
            order.append(f"out {name}")

    async def main() -> None:
        await asyncio.gather(task("a"), task("b"))

    run_async(main())  # in its own thread: the browser tests leave a loop running here
    assert order[0].startswith("in") and order[1].startswith("out")
    assert order[2].startswith("in") and order[3].startswith("out")
