"""Time to render the web UI's retries page with a large retry set (web UI).

    python -m benchmarks.web_render [--retries 100000] [--runs 7] [--no-http]

Fills the retry set of a fresh private redis-server with N failed jobs in one pipelined
pass (ten classes, realistic arguments and errors, retry counts 0-24), then times full
GETs of the retries page, 25 jobs a page: page 1, deep pages, a class filter, a text
filter, and the "most retried first" sort. Each is timed twice:

* in process: Werkzeug's test client calling the WSGI app (routing, the API's Redis round
  trips, Jinja rendering: the UI's own cost);
* over HTTP: the same request to a real ``rfetch web`` (waitress) through urllib.

Prints the median, min and max of ``--runs`` requests after one warm-up request each.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable

import click

from benchmarks.common import PrivateRedis, free_port

CLASSES = [f"myapp.jobs.Job{i}" for i in range(9)] + ["myapp.jobs.RareJob"]
ERRORS = ["Net::ReadTimeout: timed out after 5 s", "IOError: disk full",
          "KeyError: 'user'", "RuntimeError: upstream answered 503"]

CASES = [
    ("page 1", "/retries"),
    ("page 2,001 (offset 50,000)", "/retries?offset=50000"),
    ("last page (offset 99,975)", "/retries?offset=99975"),
    ("latest first, page 1", "/retries?order=desc"),
    ("class filter (1 job in 1,000)", "/retries?class=RareJob"),
    ("text filter in args (1 match)", "/retries?grep=user-77777@"),
    ("text filter, error message", "/retries?grep=disk+full"),
    ("sorted by retry count", "/retries?sort=retry_count"),
    ("dashboard", "/"),
]


def fill(client: object, count: int, seed: int = 6) -> float:
    """Add ``count`` retries in pipelined batches; returns the seconds it took."""
    rng = random.Random(seed)
    now = time.time()
    started = time.perf_counter()
    pipe = client.pipeline(transaction=False)  # type: ignore[attr-defined]
    batch: dict[str, float] = {}
    for i in range(count):
        job_class = CLASSES[-1] if i % 1000 == 999 else CLASSES[i % 9]
        payload = {
            "class": job_class, "args": [i, f"user-{i}@example.com", {"plan": "pro"}],
            "retry": True, "queue": "default", "jid": f"{i:024x}",
            "created_at": now - 3600, "enqueued_at": now - 60, "failed_at": now - 3000,
            "retried_at": now - 60, "retry_count": rng.randrange(25),
            "error_class": ERRORS[i % 4].split(":")[0],
            "error_message": ERRORS[i % 4].split(": ", 1)[1],
        }
        batch[json.dumps(payload, separators=(",", ":"))] = now + 60 + i
        if len(batch) == 5000:
            pipe.zadd("retry", batch)
            pipe.execute()
            batch = {}
    if batch:
        pipe.zadd("retry", batch)
        pipe.execute()
    return time.perf_counter() - started


def timed(get: Callable[[str], int], path: str, runs: int) -> list[float]:
    status = get(path)  # warm-up (templates compiled, connections open)
    if status != 200:
        raise RuntimeError(f"GET {path} answered {status}")
    found = []
    for _ in range(runs):
        started = time.perf_counter()
        get(path)
        found.append((time.perf_counter() - started) * 1000)
    return found


def row(name: str, values: list[float]) -> str:
    return (f"{name:<32} {statistics.median(values):>9.1f} {min(values):>9.1f} "
            f"{max(values):>9.1f}")


@click.command()
@click.option("--retries", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--runs", type=click.IntRange(min=1), default=7, show_default=True)
@click.option("--http/--no-http", default=True, help="Also time a real rfetch web server.")
def main(retries: int, runs: int, http: bool) -> None:
    from werkzeug.test import Client

    from rfetch.config import Config
    from rfetch.web import create_app

    with PrivateRedis() as server:
        seconds = fill(server.client, retries)
        click.echo(f"filled the retry set with {server.client.zcard('retry'):,} jobs "
                   f"in {seconds:.1f} s (redis {server.client.info()['redis_version']}, "
                   f"python {sys.version.split()[0]})")
        app = create_app(Config(redis_url=server.url), basic_auth=False)
        client = Client(app)

        def in_process(path: str) -> int:
            response = client.get(path)
            response.close()
            return response.status_code

        header = f"{'request':<32} {'median ms':>9} {'min':>9} {'max':>9}"
        click.echo(f"\nin process (WSGI call + Redis + rendering), {runs} runs each")
        click.echo(header)
        for name, path in CASES:
            click.echo(row(name, timed(in_process, path, runs)))
        if not http:
            return
        port = free_port()
        env = {**os.environ, "REDIS_URL": server.url}
        for name in ("RFETCH_WEB_USER", "RFETCH_WEB_PASSWORD"):
            env.pop(name, None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "rfetch.cli", "web", "--bind", f"127.0.0.1:{port}"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    urllib.request.urlopen(base + "/static/rfetch.css", timeout=2).close()
                    break
                except OSError:
                    time.sleep(0.05)

            def over_http(path: str) -> int:
                with urllib.request.urlopen(base + path, timeout=60) as answer:
                    answer.read()
                    return int(answer.status)

            click.echo(f"\nover HTTP (rfetch web, waitress, urllib), {runs} runs each")
            click.echo(header)
            for name, path in CASES:
                click.echo(row(name, timed(over_http, path, runs)))
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


if __name__ == "__main__":
    main()
