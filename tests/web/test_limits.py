"""Limiters in the web UI, the CLI, the API and the metrics: the Limits page with use, locks
and holders, its reset and release buttons, ``rfetch limits``, the registry pruned of expired
limiters, and the ``rfetch_limiter_*`` metrics."""

from __future__ import annotations

import json

import pytest
import redis
from click.testing import CliRunner
from werkzeug.test import Client

import rfetch
from rfetch.api import Api, LimiterNotFound
from rfetch.cli import main
from rfetch.config import Config
from rfetch.errors import OverLimit
from tests.support.web import flash, post, text
from tests.web.test_metrics import samples


@pytest.fixture
def seeded(config: Config) -> rfetch.Limiter:
    """A window limiter with 2 calls and 1 over the limit, and a concurrent limiter with
    one lock held (returned, still holding)."""
    client = rfetch.Client(config)
    window = rfetch.Limiter.window("stripe", 2, per=3600, wait_timeout=0, client=client)
    for _ in range(3):
        try:
            with window.within_limit():
                pass
        except OverLimit:
            pass
    erp = rfetch.Limiter.concurrent("erp", 3, lock_timeout=60, client=client)
    erp.acquire()
    return erp


def test_api_lists_limiters_with_use_locks_and_counters(api: Api, seeded: rfetch.Limiter) -> None:
    infos = {i.name: i for i in api.limiters()}
    assert set(infos) == {"stripe", "erp"}
    stripe, erp = infos["stripe"], infos["erp"]
    assert (stripe.kind, stripe.limit, stripe.period, stripe.in_use) == ("window", 2, 3600, 2)
    assert (stripe.calls, stripe.overlimit) == (2, 1)
    assert (erp.kind, erp.in_use, erp.capacity, erp.lock_timeout) == ("concurrent", 1, 3, 60)
    [lock] = erp.locks
    assert lock.holder.split(":")[1].isdigit() and 55 < lock.expires_in <= 60
    assert [lock.token for lock in api.limiter("erp").locks] == [lock.token]
    with pytest.raises(LimiterNotFound):
        api.limiter("nope")


def test_registry_drops_expired_limiters(api: Api, r: redis.Redis, seeded: rfetch.Limiter) -> None:
    r.delete("rfetch:limiter:stripe")  # as its ttl would
    assert [i.name for i in api.limiters()] == ["erp"]
    assert r.smembers("rfetch:limiters") == {b"erp"}


def test_limits_page_shows_limiters_locks_and_holders(
    client: Client, seeded: rfetch.Limiter
) -> None:
    page = text(client.get("/limits"))
    assert 'data-limiter="stripe"' in page and 'data-limiter="erp"' in page
    assert 'data-locks="erp"' in page and "lock_timeout" in page
    assert 'href="/limits"' in text(client.get("/"))  # the nav link


def test_limits_page_release_and_reset(
    client: Client, r: redis.Redis, seeded: rfetch.Limiter
) -> None:
    [token] = [f.decode()[2:] for f in r.hkeys("rfetch:limiter:erp") if f.startswith(b"l:")]
    response = post(client, "/limits/erp", {"action": "release", "token": token}, page="/limits")
    assert f"Released lock {token}" in flash(client, response)
    assert not r.hexists("rfetch:limiter:erp", f"l:{token}")
    response = post(client, "/limits/stripe", {"action": "reset"}, page="/limits")
    assert "Reset limiter stripe" in flash(client, response)
    assert not r.exists("rfetch:limiter:stripe")
    assert post(client, "/limits/stripe", {"action": "bogus"}, page="/limits").status_code == 400


def test_cli_limits(config: Config, seeded: rfetch.Limiter) -> None:
    runner = CliRunner()
    url = ["--redis-url", config.redis_url]
    listing = runner.invoke(main, ["limits", "list", *url])
    assert listing.exit_code == 0, listing.output
    assert "stripe" in listing.output and "2/2" in listing.output and "1/3" in listing.output
    shown = runner.invoke(main, ["limits", "show", "erp", *url, "--json"])
    assert json.loads(shown.output)["locks"][0]["expires_in"] > 0
    missing = runner.invoke(main, ["limits", "show", "nope", *url])
    assert missing.exit_code != 0 and "no limiter 'nope'" in missing.output
    reset = runner.invoke(main, ["limits", "reset", "stripe", *url])
    assert reset.exit_code == 0 and "reset limiter stripe" in reset.output


def test_metrics_per_limiter(client: Client, seeded: rfetch.Limiter) -> None:
    got = samples(text(client.get("/metrics")))
    assert got[("rfetch_limiter_calls_total", (("limiter", "stripe"),))] == 2
    assert got[("rfetch_limiter_overlimit_total", (("limiter", "stripe"),))] == 1
    assert got[("rfetch_limiter_in_use", (("limiter", "erp"),))] == 1
    assert got[("rfetch_limiter_limit", (("kind", "concurrent"), ("limiter", "erp")))] == 3
