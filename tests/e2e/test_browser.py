"""End-to-end: a real browser, a real ``rfetch web``, real Redis and real workers."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from rfetch.web.formatting import DASH
from tests.support.redis_server import RedisServer
from tests.support.seed import jid_of
from tests.support.wait import wait_for
from tests.support.web import XSS, failed, payload
from tests.support.workers import WorkerProcess

FAST_ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.3",
    "RFETCH_POLL_INTERVAL_AVERAGE": "0.2",
    "RFETCH_POLL_INITIAL_WAIT": "0",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
}


def seed(r: redis.Redis) -> None:
    now = time.time()
    r.mset({"stat:processed": 1234, "stat:failed": 56})
    r.sadd("queues", "default", "mail")
    r.lpush("queue:default", *[payload(jid_of(i), enqueued_at=now) for i in range(3)])
    r.zadd("retry", {failed(jid_of(100 + i), args=[XSS, i]): now + 3600 + i for i in range(3)})
    r.zadd("schedule", {payload(jid_of(200)): now + 600})
    r.zadd("dead", {failed(jid_of(300)): now - 60})


def test_every_page_loads_in_the_browser(page: Any, r: redis.Redis, shots: Path) -> None:
    seed(r)
    page.goto("/")
    page.wait_for_selector("text=Updated")  # the live chart polled stats.json
    assert page.locator("[data-stat=processed]").inner_text() == "1,234"
    for label, heading in (("Busy", "Processes"), ("Queues", "Queues"),
                           ("Retries", "Retries"), ("Scheduled", "Scheduled"),
                           ("Dead", "Dead"), ("Job classes", "Job classes"),
                           ("Find a job", "Find a job"), ("Keys & tenants", "Keys & tenants"),
                           ("Batches", "Batches"),
                           ("Limits", "Limits"),
                           ("Dashboard", "Dashboard")):
        page.click(f"nav.nav >> text={label}")
        assert page.locator("h1").first.inner_text().startswith(heading)
        page.screenshot(path=str(shots / f"{label}.png"))
    page.goto("/queues/default")
    assert page.locator("#jobs tbody tr").count() == 3
    page.fill(".jid-search input", jid_of(100))
    page.press(".jid-search input", "Enter")
    page.wait_for_selector("#explanation")
    assert "in the retry set" in page.inner_text("#explanation")
    # The job's <script> argument is shown as text, never run.
    page.goto("/retries")
    assert XSS in page.inner_text("#jobs")
    assert page.errors == [], page.errors


def test_live_chart_follows_the_counters(page: Any, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    r.set("stat:processed", 100)
    page.goto("/")
    page.wait_for_selector("text=Updated")
    r.set("stat:processed", 160)
    # Polled, not evaluated: the page's CSP forbids eval, which wait_for_function uses.
    expect(page.locator("[data-stat=processed]")).to_have_text("160")
    expect(page.locator("[data-live=processed]")).not_to_have_text(DASH)
    rate = float(page.inner_text("[data-live=processed]").replace(",", ""))
    assert rate > 0
    assert page.errors == [], page.errors


def test_retry_a_job_from_the_retries_page(page: Any, r: redis.Redis,
                                           redis_server: RedisServer, tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    client = Client(Config(redis_url=redis_server.url))
    now = time.time()
    jid = jid_of(7)
    r.zadd("retry", {
        json.dumps({"class": "testjobs.Noop", "args": [7], "jid": jid, "queue": "default",
                    "retry": True, "retry_count": 2, "error_class": "RuntimeError",
                    "error_message": "flaky", "created_at": now, "failed_at": now}): now + 3600,
        failed(jid_of(8), "testjobs.Noop"): now + 7200,
    })
    page.goto("/retries")
    assert page.locator("#jobs tbody tr").count() == 2
    page.locator("#jobs tbody tr", has_text=jid).locator("button", has_text="Retry").click()
    page.wait_for_selector(".flash-ok")
    assert "Retried: 1 job(s)." in page.inner_text(".flash")
    assert page.locator("#jobs tbody tr").count() == 1
    assert json.loads(r.lindex("queue:default", 0))["jid"] == jid
    # A worker runs it.
    worker = WorkerProcess(redis_server.url, ["-r", "testjobs", "-q", "default"],
                           env={**FAST_ENV, "RFETCH_TEST_RECORD": str(record)},
                           log_dir=tmp_path)
    try:
        wait_for(lambda: record.exists() and f"done {jid}" in record.read_text(), 20,
                 "the worker to run the retried job")
    finally:
        worker.kill()
    # Select all, then "Retry now" for the selection.
    page.locator("[data-select-all]").check()
    assert page.inner_text("[data-selection-count]") == "1 selected"
    page.click(".bulkbar >> text=Retry now")
    page.wait_for_selector(".flash-ok")
    assert r.zcard("retry") == 0
    assert "No failed job is waiting for a retry." in page.inner_text("main")
    client.redis.close()
    assert page.errors == [], page.errors


def test_quiet_a_running_worker_from_the_busy_page(page: Any, r: redis.Redis,
                                                   redis_server: RedisServer,
                                                   tmp_path: Path) -> None:
    worker = WorkerProcess(redis_server.url, ["-r", "testjobs", "-q", "default", "-c", "2"],
                           env=FAST_ENV, log_dir=tmp_path)
    try:
        identity = worker.identity(r)
        client = Client(Config(redis_url=redis_server.url))
        client.push("testjobs.Sleep", [30])  # keeps one thread busy
        page.goto("/busy")
        row = page.locator(f"#processes tr[data-identity='{identity}']")

        def shows_running_job() -> bool:
            page.reload()
            return bool(page.locator("#running", has_text="testjobs.Sleep").count() == 1)

        wait_for(shows_running_job, 15, "the busy page to show the running job", step=0.3)
        assert row.locator(".badge").inner_text() == "running"
        row.locator("button", has_text="Quiet").click()
        page.wait_for_selector(".flash-ok")
        assert "go quiet" in page.inner_text(".flash")

        def badge_quiet() -> bool:
            page.reload()
            return bool(row.locator(".badge").inner_text() == "quiet")

        wait_for(badge_quiet, 15, "the busy page to show the worker quiet", step=0.3)
        assert "quiet: no new jobs will be fetched" in worker.log()
        # Quiet: it takes no new job, while the running one goes on.
        client.push("testjobs.Noop", [1])
        time.sleep(1.5)  # a negative: the job must not be taken within this span
        assert r.llen("queue:default") == 1
        page.reload()
        assert "testjobs.Sleep" in page.inner_text("#running")
        client.redis.close()
    finally:
        worker.kill()
    assert page.errors == [], page.errors


def test_pause_a_queue_and_the_worker_stops_taking_from_it(page: Any, r: redis.Redis,
                                                          redis_server: RedisServer,
                                                          tmp_path: Path) -> None:
    record = tmp_path / "record.txt"
    worker = WorkerProcess(redis_server.url, ["-r", "testjobs", "-q", "default"],
                           env={**FAST_ENV, "RFETCH_TEST_RECORD": str(record)},
                           log_dir=tmp_path)
    client = Client(Config(redis_url=redis_server.url))
    try:
        worker.identity(r)
        client.push("testjobs.Noop", [0])
        wait_for(lambda: r.llen("queue:default") == 0 and record.exists(), 15,
                 "the worker to take jobs before the pause")
        page.goto("/queues")
        row = page.locator("#queues tr[data-queue='default']")
        row.locator("button", has_text="Pause").click()
        page.wait_for_selector(".flash-ok")
        assert row.locator(".badge").inner_text() == "paused"
        jids = [client.push("testjobs.Noop", [i]) for i in range(1, 6)]
        time.sleep(2.0)  # a negative: well beyond the pause's reach (ms) and a fetch timeout
        assert r.llen("queue:default") == 5
        page.goto("/queues/default")
        assert page.locator("#jobs tbody tr").count() == 5
        page.fill(".jid-search input", str(jids[0]))
        page.press(".jid-search input", "Enter")
        page.wait_for_selector("#explanation")
        assert "queue default is paused" in page.inner_text("#explanation")
        page.goto("/queues")
        row.locator("button", has_text="Unpause").click()
        page.wait_for_selector(".flash-ok")
        wait_for(lambda: r.llen("queue:default") == 0, 15, "the jobs to run after unpausing")
    finally:
        worker.kill()
        client.redis.close()
    assert page.errors == [], page.errors


def test_live_chart_keeps_polling_through_a_redis_reply_error(page: Any, r: redis.Redis) -> None:
    """The web poller survives a reply error (the ``queues`` set made a string): it says
    so, keeps polling, and follows the counters again once the key is fixed."""
    from playwright.sync_api import expect

    r.set("stat:processed", 100)
    page.goto("/")
    page.wait_for_selector("text=Updated")
    r.set("queues", "not a set")  # every read of it: WRONGTYPE
    expect(page.locator("text=retrying")).to_be_visible()
    r.delete("queues")
    r.set("stat:processed", 345)
    expect(page.locator("[data-stat=processed]")).to_have_text("345")
    expect(page.locator("text=Updated")).to_be_visible()
