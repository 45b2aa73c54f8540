"""Limiter definitions: names, limits, periods and rates are checked where a limiter is
created (``rfetch.ConfigError``), before any Redis call; the over-limit backoff."""

from __future__ import annotations

import random

import pytest

import rfetch
from rfetch.errors import ConfigError, OverLimit
from rfetch.limiter.spec import default_backoff, parse_period, parse_rate
from rfetch.worker.overlimit import delay_of, overrated


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("second", 1), ("minute", 60), ("hour", 3600), ("day", 86400), ("5m", 300),
     ("30s", 30), ("1.5h", 5400), ("2 days", 172800), ("s", 1), (0.5, 0.5), (2, 2.0)],
)
def test_periods(text: str | float, seconds: float) -> None:
    assert parse_period(text) == seconds


@pytest.mark.parametrize("bad", ["", "fortnight", "5x", "m5", "-1s", 0, -2, float("nan"),
                                 float("inf"), True, 0.0001, None, "1/s"])
def test_bad_periods(bad: object) -> None:
    with pytest.raises(ConfigError):
        parse_period(bad)  # type: ignore[arg-type]


def test_rates() -> None:
    assert parse_rate("100/s") == (100, 1.0)
    assert parse_rate("50 / minute") == (50, 60.0)
    assert parse_rate("1000/5m") == (1000, 300.0)
    for bad in ("100", "0/s", "-3/s", "ten/s", "100/", "100/lightyear", "1.5/s"):
        with pytest.raises(ConfigError):
            parse_rate(bad)


@pytest.mark.parametrize("name", ["", "has space", "a:b", "é", "a/b", "x" * 201, None, 7])
def test_bad_names(name: object) -> None:
    with pytest.raises(ConfigError, match="letters, digits"):
        rfetch.Limiter.window(name, 5)  # type: ignore[arg-type]


def test_good_names_and_rate_strings() -> None:
    limiter = rfetch.Limiter.window("stripe-42_x", "100/s")
    assert (limiter.spec.limit, limiter.spec.period) == (100, 1.0)
    assert rfetch.Limiter.bucket("mail", 50, per="minute").spec.period == 60
    assert rfetch.Limiter.leaky("partner", 10, per=1).spec.capacity == 1
    assert rfetch.Limiter.leaky("partner", 10, per=1, burst=3).spec.capacity == 3
    assert rfetch.Limiter.points("graphql", 1000, per=60).spec.capacity == 1000
    spec = rfetch.Limiter.concurrent("erp", 20, lock_timeout=60).spec
    assert (spec.limit, spec.period, spec.lock_timeout, spec.wait_timeout) == (20, 0, 60, 5.0)


@pytest.mark.parametrize(
    "build",
    [
        lambda: rfetch.Limiter.window("a", 0),
        lambda: rfetch.Limiter.window("a", -1),
        lambda: rfetch.Limiter.window("a", 2.5),
        lambda: rfetch.Limiter.window("a", True),
        lambda: rfetch.Limiter.window("a", 5, per=0),
        lambda: rfetch.Limiter.window("a", 5, per=-1),
        lambda: rfetch.Limiter.window("a", "100/s", per=1),
        lambda: rfetch.Limiter.window("a", "lots"),
        lambda: rfetch.Limiter.window("a", 5, wait_timeout=-1),
        lambda: rfetch.Limiter.window("a", 5, ttl=0),
        lambda: rfetch.Limiter.window("a", 5, per=3600, ttl=3600),
        lambda: rfetch.Limiter.window("a", 5, reschedule=-1),
        lambda: rfetch.Limiter.window("a", 5, backoff=3),  # type: ignore[arg-type]
        lambda: rfetch.Limiter.leaky("a", 5, burst=0),
        lambda: rfetch.Limiter.concurrent("a", 0),
        lambda: rfetch.Limiter.concurrent("a", 3, lock_timeout=0),
        lambda: rfetch.Limiter.concurrent("a", 3, lock_timeout=100, ttl=150),
    ],
)
def test_bad_definitions_raise_config_error_at_creation(build: object) -> None:
    with pytest.raises(ConfigError):
        build()  # type: ignore[operator]


def test_default_backoff_is_sidekiq_enterprise_s() -> None:
    rng = random.Random(1)
    for count in range(5):
        assert 300 * count + 1 <= default_backoff(count, rng) <= 300 * count + 300


def _exc(backoff: object = None) -> OverLimit:
    return OverLimit("over", "api", "window", 0.0, 3, backoff)  # type: ignore[arg-type]


def test_custom_backoff_and_its_fallbacks() -> None:
    rng = random.Random(1)
    assert delay_of(2, {"jid": "x"}, _exc(lambda n, job: 2.0**n), rng) == 4.0
    for broken in (lambda n, job: 1 / 0, lambda n, job: "soon", lambda n, job: -1.0,
                   lambda n, job: float("nan")):
        assert 1 <= delay_of(0, {"jid": "x"}, _exc(broken), rng) <= 300


def test_overrated_count_ignores_malformed_values() -> None:
    assert overrated({}) == 0
    assert overrated({"overrated": 3}) == 3
    for bad in ("3", -1, True, 2.5, None):
        assert overrated({"overrated": bad}) == 0


def test_over_limit_pickles() -> None:
    import pickle

    exc = pickle.loads(pickle.dumps(_exc()))
    assert (exc.name, exc.kind, exc.reschedule) == ("api", "window", 3)
