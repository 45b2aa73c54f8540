"""Batches in the web UI, the CLI and the metrics, after a real ``rfetch worker`` ran two
batches: one that succeeds, one with a job that dies (its failure shown with its error)."""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import redis
from click.testing import CliRunner
from werkzeug.test import Client

import rfetch
from rfetch.cli import main
from rfetch.push.client import DEFAULT
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, JOBS_DIR, WorkerProcess


@pytest.fixture
def two_batches(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> Iterator[tuple[rfetch.Batch, rfetch.Batch]]:
    sys.path.insert(0, str(JOBS_DIR))
    try:
        bj: ModuleType = importlib.import_module("batch_jobs")
    finally:
        sys.path.remove(str(JOBS_DIR))
    rfetch.configure(redis_url=redis_server.url)
    good = rfetch.Batch(description="good one", on_success=bj.OnSuccess)
    with good.jobs():
        for n in range(3):
            bj.Item.perform_async(n)
    bad = rfetch.Batch(description="bad one", on_death=bj.OnDeath, on_success=bj.OnSuccess)
    with bad.jobs():
        bj.Item.perform_async(10)
        bj.Doomed.perform_async(11)
    worker = WorkerProcess(redis_server.url, ["-r", "batch_jobs", "-c", "2"], env=FAST_ENV,
                           log_dir=tmp_path)
    try:
        wait_for(lambda: r.hexists(f"b-{good.bid}", "success_at")
                 and r.hexists(f"b-{bad.bid}", "complete_at"), 30, "both batches to end")
        yield good, bad
    finally:
        worker.stop()
        DEFAULT.set(None)


def test_the_batches_page_lists_progress_and_state(
    client: Client, two_batches: tuple[rfetch.Batch, rfetch.Batch]
) -> None:
    good, bad = two_batches
    page = client.get("/batches").get_data(as_text=True)
    assert good.bid in page and bad.bid in page
    assert "good one" in page and "succeeded" in page and "dead" in page
    assert 'class="batch-progress"' in page
    assert "2 created" in page and "1 succeeded" in page


def test_a_batch_page_shows_jobs_failures_and_callbacks(
    client: Client, two_batches: tuple[rfetch.Batch, rfetch.Batch]
) -> None:
    _, bad = two_batches
    page = client.get(f"/batches/{bad.bid}").get_data(as_text=True)
    assert "RuntimeError" in page and "doomed 11" in page  # the failure, with its error
    assert 'data-event="death"' in page and 'data-event="success"' in page
    assert "pushed" in page and "waiting" in page  # death fired, success did not
    for jid in bad.jids:
        assert f'data-jid="{jid}"' in page
    assert "died" in page and "succeeded" in page
    missing = client.get("/batches/" + "0" * 24)
    assert missing.status_code == 303


def test_cli_and_metrics(client: Client, two_batches: tuple[rfetch.Batch, rfetch.Batch],
                         redis_server: RedisServer) -> None:
    good, bad = two_batches
    runner = CliRunner()
    listed = runner.invoke(main, ["batches", "--json", "--redis-url", redis_server.url])
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.output)
    states = {b["bid"]: b["state"] for b in data["batches"]}
    assert states == {good.bid: "succeeded", bad.bid: "dead"}
    assert data["counters"] == {"created": 2, "completed": 2, "succeeded": 1, "died": 1}
    shown = runner.invoke(main, ["batch", bad.bid, "--redis-url", redis_server.url])
    assert shown.exit_code == 0, shown.output
    assert "RuntimeError: doomed 11" in shown.output and "death: fired" in shown.output
    as_json = runner.invoke(main, ["batch", bad.bid, "--json", "--redis-url", redis_server.url])
    detail = json.loads(as_json.output)
    assert detail["total"] == 2 and detail["failures"] == 1 and detail["death_at"] is not None
    assert {c["event"]: c["fired_at"] is not None for c in detail["callbacks_state"]} == {
        "success": False, "death": True
    }
    assert sorted(j["state"] for j in detail["jobs"]) == ["died", "succeeded"]
    gone = runner.invoke(main, ["batch", "0" * 24, "--redis-url", redis_server.url])
    assert gone.exit_code != 0 and "no batch" in gone.output
    metrics = client.get("/metrics").get_data(as_text=True)
    assert "rfetch_batches_created_total 2.0" in metrics
    assert "rfetch_batches_died_total 1.0" in metrics


def test_a_batch_page_says_when_it_expires_in_words(
    redis_server: RedisServer, r: redis.Redis, client: Client
) -> None:
    """Its TTL (a month before anything ran) reads as days, not ``2,591,946 s``."""
    sys.path.insert(0, str(JOBS_DIR))
    try:
        bj: ModuleType = importlib.import_module("batch_jobs")
    finally:
        sys.path.remove(str(JOBS_DIR))
    rfetch.configure(redis_url=redis_server.url)
    try:
        batch = rfetch.Batch(description="waiting")
        with batch.jobs():
            bj.Item.perform_async(1)
    finally:
        DEFAULT.set(None)
    ttl = r.ttl(f"b-{batch.bid}")
    assert 29 * 86400 < ttl <= 30 * 86400
    page = client.get(f"/batches/{batch.bid}").get_data(as_text=True)
    assert re.search(r"<th>Expires</th><td>in (29|30) days</td>", page), page
