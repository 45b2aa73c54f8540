"""Fixtures of the model-based tier: a redis-server of its own and a fleet of real
``rfetch worker -r model_jobs`` processes, kept for the whole module (starting workers is
the slow part), and the examples' tally printed at the end."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from collections.abc import Iterator

import pytest

import rfetch
from rfetch.api import Api
from tests.model.harness import Evidence, Fleet, System
from tests.support.redis_server import RedisServer
from tests.support.workers import JOBS_DIR


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    base = tmp_path_factory.mktemp("model")
    (base / "evidence").mkdir()
    server = RedisServer()
    server.start()
    sys.path.insert(0, str(JOBS_DIR))
    try:
        jobs = importlib.import_module("model_jobs")
    finally:
        sys.path.remove(str(JOBS_DIR))
    config = rfetch.Config(redis_url=server.url)
    client = rfetch.Client(config)
    # Take the one grant of the day of the jobs' FULL limiter: every job's call is over it.
    rfetch.Limiter.window("model-full", 1, per=86400, ttl=3 * 86400, client=client).acquire()
    fleet = Fleet(server.url, base / "evidence", base)
    try:
        yield System(server.client(), client, Api(config), fleet,
                     Evidence(base / "evidence"), jobs)
    finally:
        fleet.stop_all()
        server.cleanup()


@pytest.fixture
def tally(capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
          ) -> Iterator[Counter[str]]:
    """Counts of examples, steps, jobs and events, printed after the test."""
    counts: Counter[str] = Counter()
    yield counts
    with capsys.disabled():
        line = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        print(f"\n[{request.node.name}] {line}")


