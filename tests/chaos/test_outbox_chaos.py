"""The outbox under fire: an application commits, in one transaction, an order row and its
job (20 % of transactions rolled back) and is SIGKILLed at random points, also right after
a commit; two relays are SIGKILLed again and again; Redis is killed once and restarted from
its AOF (``appendfsync always``). At the end the jobs in Redis are exactly the committed
orders, each once: 0 lost, 0 extra, 0 doubled by the relay; a worker then runs each once.
On PostgreSQL, and smaller on SQLite."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from rfetch.outbox.connection import connect
from tests.support.outbox import pg_database, rows, sqlite_url
from tests.support.process import RfetchProcess
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

__all__ = ["pg_database", "sqlite_url"]

ROOT = Path(__file__).resolve().parents[2]


class App:
    """The application process (tests/support/outbox_app.py), restarted after each kill."""

    def __init__(self, url: str, redis_url: str, rng: random.Random, log: Path) -> None:
        self.url, self.redis_url, self.rng = url, redis_url, rng
        self.log = open(log, "ab")  # noqa: SIM115 - the test's own file, closed with it
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = self.exits = 0
        self.orders_at_start = 0

    def start(self) -> None:
        self.orders_at_start = len(committed_orders(self.url))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.outbox_app", self.url, self.redis_url,
             str(self.rng.randrange(1 << 30))],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=self.log,
        )

    def kill(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
            self.kills += 1
        self.proc.wait(10)

    def restart_if_exited(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            assert self.proc.returncode == -9, self.proc.returncode
            self.exits += 1
            self.start()

    def has_committed(self) -> bool:
        """Whether this run of the app committed an order: it is then worth killing (a kill
        during its imports, which take seconds on a loaded machine, tests nothing)."""
        return len(committed_orders(self.url)) > self.orders_at_start


def fresh_orders(url: str) -> None:
    db = connect(url, autocommit=True)
    db.execute("DROP TABLE IF EXISTS orders")
    db.execute("CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY)")
    db.execute("DELETE FROM rfetch_outbox")
    db.close()


def committed_orders(url: str) -> set[str]:
    db = connect(url, autocommit=True)
    try:
        return {str(row[0]) for row in db.execute("SELECT id FROM orders")}
    finally:
        db.close()


def run_jobs(redis_url: str, tmp_path: Path, count: int) -> Counter[str]:
    """Run the queued jobs with one worker; the orders they ran, with their runs."""
    ran = tmp_path / "ran.txt"
    ran.touch()
    worker = WorkerProcess(redis_url, ["-r", "outbox_jobs", "-c", "5"],
                           {"RFETCH_OUTBOX_RAN": str(ran)}, tmp_path)
    try:
        wait_for(lambda: len(ran.read_text().splitlines()) >= count, 180,
                 lambda: f"{count} jobs run: {worker.log()[-2000:]}")
    finally:
        worker.stop(30)
    return Counter(ran.read_text().splitlines())


def run_outbox_chaos(url: str, tmp_path: Path, seconds: float, say: Callable[[str], None],
                     seed: int) -> None:
    rng = random.Random(seed)
    fresh_orders(url)
    redis_server = RedisServer(appendonly=True)
    redis_server.start()
    relays: list[RfetchProcess] = []
    app = App(url, redis_server.url, rng, tmp_path / "app.log")

    def relay() -> RfetchProcess:
        return RfetchProcess("relay", ["--database", url, "--batch-size", "20"],
                             redis_server.url, log_dir=tmp_path)

    try:
        app.start()
        relays = [relay(), relay()]
        relay_kills = 0
        restarted_redis = False
        start = time.monotonic()

        def enough() -> bool:
            """The run's length: at least ``seconds``, and on a loaded machine (where each
            start of the app costs seconds) until it did what the test asserts, at most 240 s."""
            elapsed = time.monotonic() - start
            did = (len(committed_orders(url)) > 30 and app.kills + app.exits > 3
                   and relay_kills > 3)
            return elapsed >= 240 or (elapsed >= seconds and did)

        while not enough():
            time.sleep(rng.uniform(0.1, 0.8))
            app.restart_if_exited()
            roll = rng.random()
            if roll < 0.35 and app.has_committed():
                app.kill()  # once this run of it has committed (its imports take a while)
                app.start()
            elif roll < 0.55:
                victim = rng.randrange(len(relays))
                relays[victim].kill()
                relays[victim] = relay()
                relay_kills += 1
            if not restarted_redis and time.monotonic() - start > seconds / 2:
                redis_server.kill()
                time.sleep(rng.uniform(0.2, 1.0))
                redis_server.start()
                restarted_redis = True
        app.kill()
        wait_for(lambda: not rows(url), 180, "the relays to empty the outbox")
        for proc in relays:  # a relay started just now handles TERM once it says it runs
            wait_for(lambda p=proc: "outbox relay on" in p.log(), 60, "the relay's start line")
            assert proc.stop(30) == 0, proc.log()[-3000:]
        orders = committed_orders(url)
        client = redis_server.client()
        jobs = Counter(json.loads(raw)["args"][0] for raw in client.lrange("queue:default", 0, -1))
        lost = orders - set(jobs)
        extra = set(jobs) - orders
        doubled = {order: n for order, n in jobs.items() if n > 1}
        say(f"{len(orders)} committed orders, {len(jobs)} distinct jobs in Redis; app killed "
            f"{app.kills} times (+{app.exits} self-kills after a commit), relays killed "
            f"{relay_kills} times, Redis restarted once; lost {len(lost)}, extra {len(extra)}, "
            f"doubled {len(doubled)}; {len(client.keys('rfetch:outbox:pushed:*'))} markers "
            "left by relays killed between their push and their delete")
        ran = run_jobs(redis_server.url, tmp_path, len(jobs))
        say(f"a worker then ran {len(ran)} distinct jobs ({sum(ran.values())} runs)")
        assert ran == Counter(orders)
        assert len(orders) > 30  # the run lasts until there are (at most 240 s)
        assert app.kills + app.exits > 3 and relay_kills > 3
        assert (lost, extra, doubled) == (set(), set(), {})
    finally:
        if app.proc is not None and app.proc.poll() is None:
            app.kill()
        for proc in relays:
            proc.kill()
        redis_server.cleanup()


@pytest.mark.slow
def test_outbox_chaos_postgresql(pg_database: str, tmp_path: Path,
                                 say: Callable[[str], None]) -> None:
    run_outbox_chaos(pg_database, tmp_path, 40.0, say, seed=20261127)


@pytest.mark.slow
def test_outbox_chaos_sqlite(sqlite_url: str, tmp_path: Path,
                             say: Callable[[str], None]) -> None:
    run_outbox_chaos(sqlite_url, tmp_path, 15.0, say, seed=7)
