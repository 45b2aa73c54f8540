"""Time to render the web UI's Keys & tenants page with many held keys and a large retry
set (ordering keys, fair tenants and the web UI).

    python -m benchmarks.web_keys [--keys 100000] [--tenants 1000] [--retries 100000] [--runs 7]

Fills a fresh private redis-server through the real client: ``--keys`` jobs of distinct
ordering keys (each the holder of its key, waiting in queue ``imports``), ``--tenants``
tenant jobs of the same queue, one key blocked by a failed holder (moved to the retry set
as a failure leaves it) and ``--retries`` plain failed jobs after it in the retry set. Then
times GETs of ``/keys`` through Werkzeug's test client (routing, the API's Redis round
trips, Jinja rendering) and prints median, min and max of ``--runs`` requests after one
warm-up, checking that the blocked key is on the page.
"""

from __future__ import annotations

import json
import statistics
import time

import click
from werkzeug.test import Client

from benchmarks.common import PrivateRedis
from rfetch.config import Config
from rfetch.push.client import Client as JobClient
from rfetch.web import create_app


def fill(url: str, keys: int, tenants: int, retries: int) -> None:
    jobs = JobClient(Config(redis_url=url))
    r = jobs.redis
    jobs.push_bulk("app.Sync", [[i] for i in range(keys)], {"queue": "imports"},
                   options_for=lambda a: {"queue": "imports", "key": f"customer:{a[0]}"})
    jobs.push_bulk("app.Sync", [[i] for i in range(tenants)], {"queue": "imports"},
                   options_for=lambda a: {"queue": "imports", "tenant": f"t{a[0]}"})
    raw = r.lrange("queue:imports", -1, -1)[0]  # the oldest: customer:0's holder
    body = json.loads(raw)
    body.update(retry_count=1, error_class="KeyError", error_message="'sku'")
    r.lrem("queue:imports", 1, raw)
    now = time.time()
    r.zadd("retry", {json.dumps(body): now + 5})
    for start in range(0, retries, 10_000):
        r.zadd("retry", {
            json.dumps({"class": "app.Mail", "args": [i, "x" * 200], "jid": f"{i:024x}",
                        "queue": "default", "error_class": "IOError",
                        "error_message": "timeout", "retry_count": 1}): now + 10 + i
            for i in range(start, min(start + 10_000, retries))})
    r.close()


@click.command()
@click.option("--keys", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--tenants", type=click.IntRange(min=0), default=1_000, show_default=True)
@click.option("--retries", type=click.IntRange(min=0), default=100_000, show_default=True)
@click.option("--runs", type=click.IntRange(min=1), default=7, show_default=True)
def main(keys: int, tenants: int, retries: int, runs: int) -> None:
    with PrivateRedis() as server:
        started = time.perf_counter()
        fill(server.url, keys, tenants, retries)
        click.echo(f"{keys:,} held keys, {tenants:,} tenants, {retries + 1:,} retries "
                   f"(filled in {time.perf_counter() - started:.1f} s)")
        client = Client(create_app(Config(redis_url=server.url), basic_auth=False))
        for path in ("/keys", "/keys?limit=200"):
            assert client.get(path).status_code == 200
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                response = client.get(path)
                times.append((time.perf_counter() - t0) * 1000)
            page = response.get_data(as_text=True)
            assert '<tr class="row-blocked" data-key="customer:0">' in page, "no blocked key"
            click.echo(f"{path:<18} median {statistics.median(times):7.1f} ms "
                       f"(min {min(times):.1f}, max {max(times):.1f})")


if __name__ == "__main__":
    main()
