"""Screenshots of every page of the web UI, for docs/screenshots (``scripts/screenshots``).

    python -m tests.e2e.screenshots [OUT_DIR [PAGE ...]]   # default docs/screenshots, all
    python -m tests.e2e.screenshots docs/screenshots keys  # only keys.png

Starts a private redis-server, fills it with a shop's jobs (history, queues, retries,
scheduled and dead jobs, per-class metrics), starts two real workers running
``tests/jobs/shopjobs.py`` while a thread keeps pushing jobs, serves the UI with a real
``rfetch web`` and photographs each page with Debian's headless Chromium at 1280x800.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rfetch.config import Config
from rfetch.observability.stats import BUCKETS_MS
from rfetch.push.client import Client
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, browser_missing
from tests.support.redis_server import RedisServer
from tests.support.web import WebProcess
from tests.support.workers import WorkerProcess

JOBS = {
    "shop.mail.SendWelcomeEmail": "mail",
    "shop.images.ResizeProductImage": "default",
    "shop.billing.ChargeCard": "critical",
    "shop.inventory.SyncInventory": "default",
    "shop.billing.GenerateInvoicePdf": "reports",
}
ERRORS = {
    "shop.mail.SendWelcomeEmail": ("TimeoutError", "SMTP server smtp.example.com did not "
                                   "answer within 10 s"),
    "shop.billing.ChargeCard": ("ConnectionError", "payment gateway answered 503 Service "
                                "Unavailable"),
    "shop.images.ResizeProductImage": ("PIL.UnidentifiedImageError", "cannot identify "
                                       "image file '/uploads/8f3a/IMG_2231.HEIC'"),
    "shop.inventory.SyncInventory": ("KeyError", "'sku'"),
}
FAST_ENV = {"RFETCH_HEARTBEAT_INTERVAL": "1", "RFETCH_POLL_INTERVAL_AVERAGE": "1",
            "RFETCH_POLL_INITIAL_WAIT": "0"}


def args_for(job_class: str, rng: random.Random) -> list[Any]:
    user = rng.randrange(10_000, 99_999)
    if "Email" in job_class:
        return [user, f"customer{user}@example.com", "welcome-v2"]
    if "Image" in job_class:
        return [f"products/{user}/main.jpg", {"sizes": [320, 640, 1280]}]
    if "Charge" in job_class:
        return [f"order-{user}", round(rng.uniform(5, 400), 2), "EUR"]
    if "Inventory" in job_class:
        return [f"warehouse-{rng.randrange(1, 5)}"]
    return [f"invoice-{user}", {"locale": "en_GB"}]


def payload(job_class: str, rng: random.Random, **extra: Any) -> str:
    body = {"class": job_class, "args": args_for(job_class, rng), "retry": True,
            "queue": JOBS[job_class], "jid": f"{rng.getrandbits(96):024x}",
            "created_at": time.time() - rng.uniform(60, 7200), **extra}
    return json.dumps(body, separators=(",", ":"))


def seed(server: RedisServer) -> None:
    r = server.client()
    rng = random.Random(6)
    now = time.time()
    today = dt.datetime.now(dt.timezone.utc).date()
    counters: dict[str, int] = {}
    total_p = total_f = 0
    for i in range(90):
        day = (today - dt.timedelta(days=i)).isoformat()
        weekday = (today - dt.timedelta(days=i)).weekday()
        processed = int(rng.uniform(38_000, 52_000) * (0.55 if weekday >= 5 else 1.0))
        failed = int(processed * rng.uniform(0.004, 0.02))
        if i == 9:
            failed = int(processed * 0.11)  # a bad deploy
        counters[f"stat:processed:{day}"] = processed
        counters[f"stat:failed:{day}"] = failed
        total_p += processed
        total_f += failed
    counters["stat:processed"] = total_p + 1_204_311
    counters["stat:failed"] = total_f + 15_020
    r.mset(counters)
    r.sadd("queues", "default", "mail", "critical", "reports", "imports")
    for queue, count in (("reports", 37), ("imports", 1_204)):
        classes = [c for c, q in JOBS.items() if q == queue] or ["shop.inventory.SyncInventory"]
        ages = sorted((rng.uniform(5, 900) for _ in range(count)), reverse=True)
        r.lpush(f"queue:{queue}", *[  # the first pushed (the oldest) runs next
            payload(classes[0], rng, queue=queue, enqueued_at=now - age) for age in ages])
    r.sadd("paused", "imports")
    retries = {}
    for i in range(137):
        job_class = list(ERRORS)[i % 4]
        error_class, message = ERRORS[job_class]
        count = min(int(rng.expovariate(0.35)), 24)
        retries[payload(job_class, rng, retry_count=count, error_class=error_class,
                        error_message=message, failed_at=now - rng.uniform(600, 86_400),
                        retried_at=now - rng.uniform(1, 600))] = now + rng.uniform(20, 36_000)
    r.zadd("retry", retries)
    r.zadd("schedule", {
        payload(rng.choice(list(JOBS)), rng): now + rng.uniform(60, 7 * 86_400)
        for _ in range(24)})
    r.zadd("dead", {
        payload(job_class, rng, retry_count=25, error_class=ERRORS[job_class][0],
                error_message=ERRORS[job_class][1],
                failed_at=now - rng.uniform(86_400, 20 * 86_400)): now - rng.uniform(60, 9e5)
        for job_class in [list(ERRORS)[i % 4] for i in range(12)]})
    pipe = r.pipeline(transaction=False)
    for minute in range(60):
        key = "rfetch:metrics:" + time.strftime("%Y%m%d%H%M", time.gmtime(now - 60 * minute))
        for job_class in JOBS:
            runs = rng.randrange(20, 400)
            pipe.hincrby(key, f"{job_class}|p", runs)
            if job_class in ERRORS:
                pipe.hincrby(key, f"{job_class}|f", int(runs * rng.uniform(0, 0.06)))
            center = {"Email": 7, "Image": 9, "Charge": 8, "Inventory": 10}.get(
                next((k for k in ("Email", "Image", "Charge", "Inventory") if k in job_class),
                     ""), 11)
            for _ in range(runs):
                bucket = max(0, min(len(BUCKETS_MS), int(rng.gauss(center, 1.2))))
                pipe.hincrby(key, f"{job_class}|b{bucket}", 1)
        pipe.expire(key, 7200)
    pipe.execute()
    r.close()


def seed_keys(url: str) -> None:
    """Ordering keys and tenants for the keys page, in the ``imports`` queue (paused and
    served by no worker, so the picture holds still): customers' imports ordered per
    customer, two keys blocked by a failed holder (in the retry set, as a failure leaves
    it), and tenants of the fair queue with their backlog and weights."""
    client = Client(Config(redis_url=url))
    r = client.redis
    rng = random.Random(5)
    now = time.time()
    job = "shop.inventory.SyncInventory"
    failures = {"customer:1042": ("KeyError", "'sku' missing in row 118 of "
                                  "stock-2026-11.csv"),
                "customer:2203": ("ConnectionError", "warehouse API answered 502 Bad "
                                  "Gateway")}
    for n, customer in enumerate(("customer:1042", "customer:2203", "customer:3381",
                                  "customer:4410", "customer:5120", "customer:6675")):
        jids = [client.push(job, [f"warehouse-{rng.randrange(1, 5)}", customer, i],
                            {"queue": "imports", "key": customer})
                for i in range(rng.randrange(1, 7))]
        if customer in failures:
            holder = jids[0]
            raw = next(v for v in r.lrange("queue:imports", 0, -1)
                       if json.loads(v)["jid"] == holder)
            body = json.loads(raw)
            error_class, message = failures[customer]
            body.update(retry_count=n + 2, error_class=error_class, error_message=message,
                        failed_at=now - 40 * (n + 1), retried_at=now - 30 * (n + 1))
            r.lrem("queue:imports", 1, raw)
            r.zadd("retry", {json.dumps(body, separators=(",", ":")):
                             now + 900 * (n + 1)})
    for tenant, count, weight in (("acme", 41, 3), ("globex", 17, 1), ("initech", 6, 1),
                                  ("umbrella", 0, 2)):
        for i in range(count):
            client.push(job, [f"warehouse-{rng.randrange(1, 5)}", tenant, i],
                        {"queue": "imports", "tenant": tenant})
        if weight != 1:
            r.hset("rfetch:fair-weights:imports", tenant, weight)
    client.redis.close()


def keep_pushing(url: str, stop: threading.Event) -> None:
    client = Client(Config(redis_url=url))
    rng = random.Random(7)
    classes = ["shop.mail.SendWelcomeEmail", "shop.images.ResizeProductImage",
               "shop.billing.ChargeCard", "shop.inventory.SyncInventory"]
    while not stop.is_set():
        job_class = rng.choice(classes)
        client.push(job_class, args_for(job_class, rng), {"queue": JOBS[job_class]})
        stop.wait(rng.uniform(0.01, 0.06))
    client.redis.close()


def main(out: Path, only: set[str] | None = None) -> None:
    reason = browser_missing()
    if reason:
        raise SystemExit(f"cannot take screenshots: {reason}")
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    server = RedisServer()
    server.start()
    workers: list[WorkerProcess] = []
    stop = threading.Event()
    web = None
    try:
        seed(server)
        seed_keys(server.url)
        queues = ["-q", "critical,3", "-q", "mail,2", "-q", "default,1", "-q", "reports,1"]
        for tag in ("web-1", "web-2"):
            workers.append(WorkerProcess(server.url, ["-r", "shopjobs", *queues, "-c", "5",
                                                      "-g", tag], env=FAST_ENV))
        pusher = threading.Thread(target=keep_pushing, args=(server.url, stop), daemon=True)
        pusher.start()
        web = WebProcess(server.url, ["--poll-interval", "2"])
        web.wait_ready()
        r = server.client()
        for worker in workers:
            worker.identity(r)
        a_retry = json.loads(r.zrange("retry", 3, 3)[0])["jid"]
        r.close()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEWPORT, base_url=web.url)
            page.on("dialog", lambda dialog: dialog.dismiss())
            page.goto("/")
            if only is None or "dashboard" in only:
                time.sleep(30)  # fifteen polls of the live chart
            shots = [
                ("dashboard", None),
                ("dashboard-history", None),
                ("busy", "/busy"),
                ("queues", "/queues"),
                ("queue", "/queues/imports"),
                ("retries", "/retries"),
                ("retries-by-retry-count", "/retries?sort=retry_count"),
                ("retry-job", None),
                ("scheduled", "/scheduled"),
                ("dead", "/dead"),
                ("classes", "/classes"),
                ("explain", f"/explain?jid={a_retry}"),
                ("keys", "/keys"),
            ]
            for name, path in shots:
                if only is not None and name not in only:
                    continue
                if path is not None:
                    page.goto(path)
                elif name == "dashboard-history":
                    page.mouse.wheel(0, 560)
                    time.sleep(0.5)
                elif name == "retry-job":
                    page.goto("/retries")
                    page.locator("#jobs tbody tr").nth(2).locator("a.strong").click()
                page.wait_for_load_state("networkidle")
                # The keys page has three tables: show them all (blocked keys, keys, tenants).
                page.screenshot(path=str(out / f"{name}.png"), full_page=name == "keys")
                print(out / f"{name}.png")
            browser.close()
    finally:
        stop.set()
        if web is not None:
            web.stop()
        for worker in workers:
            worker.kill()
        server.cleanup()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/screenshots"),
         set(sys.argv[2:]) or None)
