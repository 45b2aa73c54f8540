"""Every page of the web UI renders what the API reads, on a real Redis."""

from __future__ import annotations

import datetime as dt
import json
import re
import time

import pytest
import redis
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.observability.stats import BUCKETS_MS
from rfetch.web import WebApp
from rfetch.web.formatting import DASH, entry_key
from tests.support.seed import jid_of
from tests.support.web import IDENTITY, add_process, failed, payload, text


@pytest.fixture
def seeded(r: redis.Redis) -> None:
    now = time.time()
    today = time.strftime("%Y-%m-%d", time.gmtime())
    r.mset({"stat:processed": 123456, "stat:failed": 789,
            f"stat:processed:{today}": 4321, f"stat:failed:{today}": 21})
    r.sadd("queues", "default", "mail")
    r.lpush("queue:default", *[payload(jid_of(i), enqueued_at=now - 30) for i in range(3)])
    r.lpush("queue:mail", payload(jid_of(9), "app.Welcome", [42], "mail", enqueued_at=now))
    r.zadd("retry", {failed(jid_of(100 + i), retry_count=i): now + 60 * i for i in range(4)})
    r.zadd("schedule", {payload(jid_of(200), "app.Report", ["weekly"]): now + 3600})
    r.zadd("dead", {failed(jid_of(300), "app.Broken", error="gave up"): now - 60})
    add_process(r, running=[payload(jid_of(400), "app.Slow", [7])])
    minute = time.strftime("%Y%m%d%H%M", time.gmtime())
    r.hset(f"rfetch:metrics:{minute}",
           mapping={"app.Mail|p": 10, "app.Mail|f": 2, "app.Mail|b3": 10})


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", ["Dashboard", "123,456", "789", "4,321", "Largest queues", "Eviction policy"]),
        ("/busy", [IDENTITY, "app.Slow", "5", "blue", "api", jid_of(400)]),
        ("/queues", ["default", "mail", "30 s"]),
        ("/queues/default", ["app.Mail", jid_of(0), jid_of(2)]),
        ("/queues/mail", ["app.Welcome", "[42]"]),
        ("/retries", ["Retries", jid_of(100), jid_of(103), "IOError", "timeout"]),
        ("/scheduled", ["Scheduled", "app.Report", "weekly"]),
        ("/dead", ["Dead", "app.Broken", "gave up"]),
        ("/classes", ["app.Mail", "app.Broken", "app.Report", "app.Slow", "20.0 %"]),
        ("/explain", ["Find a job"]),
        (f"/explain?jid={jid_of(0)}", ["waiting in queue default at position 1 of 3"]),
    ],
)
def test_every_page_renders_its_content(client: Client, path: str, expected: list[str]) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    body = text(response)
    for fragment in expected:
        assert fragment in body, f"{fragment!r} not on {path}"
    assert "</html>" in body


def test_dashboard_history_chart_and_links(client: Client, r: redis.Redis) -> None:
    today = dt.datetime.now(dt.timezone.utc).date()
    day = (today - dt.timedelta(days=2)).isoformat()
    r.mset({f"stat:processed:{day}": 500, f"stat:failed:{day}": 7})
    body = text(client.get("/?days=7"))
    assert f"{day}: 500 processed, 7 failed" in body  # the bar's tooltip
    assert body.count('class="bar-processed"') == 7
    assert 'data-source="/stats.json"' in body
    assert text(client.get("/?days=90")).count('class="bar-processed"') == 90
    assert text(client.get("/?days=12345")).count('class="bar-processed"') == 30  # default


@pytest.mark.usefixtures("seeded")
def test_stats_json_is_what_the_live_chart_polls(client: Client) -> None:
    before = time.time()
    response = client.get("/stats.json")
    after = time.time()
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    body = json.loads(response.data)
    assert body["processed"] == 123456
    assert body["failed"] == 789
    assert body["enqueued"] == 4
    assert body["retry_size"] == 4
    assert body["busy"] == 1
    assert body["processes"] == 1
    assert before <= body["time"] <= after  # the server's clock, read during the request
    assert response.headers["Cache-Control"] == "no-store"


def test_busy_page_shows_quiet_and_expired_processes(client: Client, r: redis.Redis) -> None:
    add_process(r, "quiet-host:1:aaaaaaaaaaaa", quiet=True, busy=0)
    r.sadd("processes", "gone-host:2:bbbbbbbbbbbb")  # heartbeat expired
    body = text(client.get("/busy"))
    assert "quiet-host:1:aaaaaaaaaaaa" in body
    assert "badge-quiet" in body
    assert "gone-host" not in body
    body = text(client.get("/busy?all=1"))
    assert "gone-host:2:bbbbbbbbbbbb" in body
    assert "expired" in body


def test_empty_redis_renders_every_page(client: Client) -> None:
    for path in ("/", "/busy", "/queues", "/queues/none", "/retries", "/scheduled", "/dead",
                 "/classes", "/batches", "/explain", "/explain?jid=" + jid_of(1)):
        response = client.get(path)
        assert response.status_code == 200, path
    assert "No worker process is running" in text(client.get("/busy"))
    assert "The dead set is empty." in text(client.get("/dead"))
    assert "No batch yet" in text(client.get("/batches"))
    assert "not found in running jobs" in text(client.get("/explain?jid=" + jid_of(1)))


def test_queue_pages_page_and_filter(client: Client, r: redis.Redis) -> None:
    r.sadd("queues", "bulk")
    # LPUSH in order: jid 0 is pushed first, so it runs next (position 0).
    for i in range(60):
        cls = "app.Even" if i % 2 == 0 else "app.Odd"
        r.lpush("queue:bulk", payload(jid_of(i), cls, [i, f"user-{i}"], "bulk"))
    body = text(client.get("/queues/bulk?limit=25&offset=25"))
    rows = re.findall(r'type="checkbox" name="jid" value="([0-9a-f]{24})"', body)
    assert rows == [jid_of(i) for i in range(25, 50)]
    assert "26\u201350" in body and "of 60" in body
    assert 'rel="next" href="/queues/bulk?offset=50&amp;limit=25"' in body
    assert 'rel="prev" href="/queues/bulk?offset=0&amp;limit=25"' in body
    newest = text(client.get("/queues/bulk?order=newest&limit=25"))
    assert re.findall(r'type="checkbox" name="jid" value="([0-9a-f]{24})"', newest)[0] == jid_of(59)
    only_odd = text(client.get("/queues/bulk?class=Odd&limit=100"))
    assert len(re.findall(r'type="checkbox" name="jid" value=', only_odd)) == 30
    grep = text(client.get("/queues/bulk?grep=user-17"))
    assert re.findall(r'type="checkbox" name="jid" value="([0-9a-f]{24})"', grep) == [jid_of(17)]
    assert "Delete all matching" in grep


def test_set_pages_sort_filter_and_page(client: Client, r: redis.Redis) -> None:
    now = time.time()
    r.zadd("retry", {
        failed(jid_of(i), "app.A" if i % 3 else "app.B", [i], retry_count=i % 7,
               error=f"error {i}"): now + i
        for i in range(100)
    })
    by_time = text(client.get("/retries"))
    assert re.findall(r"<div class=\"mono small muted\">([0-9a-f]{24})</div>", by_time)[:3] == [
        jid_of(0), jid_of(1), jid_of(2)]
    latest = text(client.get("/retries?order=desc"))
    assert re.findall(r"<div class=\"mono small muted\">([0-9a-f]{24})</div>", latest)[0] == (
        jid_of(99))
    worst = text(client.get("/retries?sort=retry_count&limit=50"))
    counts = [int(c) for c in re.findall(r'<td class="num">(\d+)</td>', worst)]
    assert counts == sorted(counts, reverse=True) and counts[0] == 6
    deep = text(client.get("/retries?offset=75&limit=25"))
    assert "76\u2013100" in deep and 'rel="next"' not in deep
    only_b = text(client.get("/retries?class=B&limit=100"))
    assert len(re.findall(r'name="key"', only_b)) == 34
    grep = text(client.get("/retries?grep=error%2042"))
    assert len(re.findall(r'name="key"', grep)) == 1


def test_set_job_detail_page(client: Client, api: Api, r: redis.Redis) -> None:
    r.zadd("retry", {failed(jid_of(5), args=[{"user": 5}], error="line 1\nline 2"): 1000.5})
    record = api.retries.page().jobs[0]
    key = entry_key(record)
    body = text(client.get(f"/retries/{key}"))
    assert jid_of(5) in body and "line 1\nline 2" in body and "&#34;user&#34;: 5" in body
    assert "Retry now" in body and "Kill" in body
    missing = client.get("/retries/1000.5-0000000000000000")
    assert missing.status_code == 404
    assert "no longer in the retries set" in text(missing)
    assert client.get("/retries/not-a-key").status_code == 400


def test_classes_page_counts_every_place_and_metrics(client: Client, r: redis.Redis) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", *[payload(jid_of(i), "app.Count") for i in range(5)])
    r.zadd("dead", {failed(jid_of(50), "app.Count"): 1})
    minute = time.strftime("%Y%m%d%H%M", time.gmtime())
    r.hset(f"rfetch:metrics:{minute}",
           mapping={"app.Count|p": 40, "app.Count|f": 4, "app.Count|b3": 38,
                    f"app.Count|b{len(BUCKETS_MS)}": 2})
    body = text(client.get("/classes?minutes=5"))
    row = body[body.index("app.Count"):]
    row = row[: row.index("</tr>")]
    cells = re.findall(r'<td class="num[^"]*"[^>]*>(.*?)</td>', row, re.S)
    plain = [re.sub(r"<[^>]+>", "", c).strip() for c in cells]
    assert plain == ["5", DASH, DASH, "1", DASH, "40", "4", "10.0 %", "≤ 10 ms", "≤ 10 ms",
                     "&gt; 1 h"]
    assert "/dead?class=app.Count" in row


def test_explain_page_links_to_the_job(client: Client, api: Api, r: redis.Redis) -> None:
    r.zadd("dead", {failed(jid_of(7), error="fatal"): 1234.0})
    body = text(client.get(f"/explain?jid={jid_of(7)}"))
    assert "dead since" in body
    key = entry_key(api.dead.page().jobs[0])
    assert f'href="/dead/{key}?jid={jid_of(7)}"' in body
    r.sadd("queues", "q")
    r.sadd("paused", "q")
    r.lpush("queue:q", payload(jid_of(8), queue="q"))
    body = text(client.get(f"/explain?jid=%20{jid_of(8)}%20"))
    assert "queue q is paused" in body
    assert 'href="/queues/q"' in body


def test_static_assets_and_unknown_pages(client: Client, app: WebApp) -> None:
    css = client.get("/static/rfetch.css")
    assert css.status_code == 200 and css.mimetype == "text/css"
    assert "max-age" in css.headers["Cache-Control"]
    js = client.get("/static/rfetch.js")
    assert js.status_code == 200 and "live-chart" in text(js)
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/nope.js").status_code == 404
    assert client.get("/nope").status_code == 404
    page = text(client.get("/"))
    assert re.search(r'href="/static/rfetch.css\?v=[0-9a-f]{10}"', page)
    assert "cdn" not in page.lower() and "https://" not in page


def test_redis_down_answers_503(make_app: object) -> None:
    from rfetch.config import Config
    from rfetch.web import create_app

    app = create_app(Config(redis_url="redis://127.0.0.1:1/0"),
                     basic_auth=False)
    client = Client(app)
    response = client.get("/retries")
    assert response.status_code == 503
    assert "Cannot read Redis at redis://127.0.0.1:1/0" in text(response)
    assert client.get("/metrics").status_code == 503
    assert client.get("/stats.json").status_code == 503


def test_large_retry_set_pages_without_loading_it(client: Client, r: redis.Redis) -> None:
    """100,000 retries: page 1 and a deep page read one page from Redis, and a filtered
    page stops reading once it has its page (the 25 ``Rare`` jobs lie in the first quarter
    of the set). Measured in bytes Redis sent, not in seconds, which are the machine's."""
    pipe = r.pipeline(transaction=False)
    whole = 0
    for start in range(0, 100_000, 10_000):
        members = {failed(jid_of(i), "app.Big" if i % 1000 else "app.Rare", [i]): i
                   for i in range(start, start + 10_000)}
        whole += sum(len(member) for member in members)
        pipe.zadd("retry", members)
    pipe.execute()
    for path, first, most in (("/retries", 0, 100_000), ("/retries?offset=90000", 90_000, 100_000),
                              ("/retries?class=Rare", 0, whole // 2)):
        before = r.info("stats")["total_net_output_bytes"]
        body = text(client.get(path))
        sent = r.info("stats")["total_net_output_bytes"] - before
        assert jid_of(first) in body, path
        assert sent < most, f"{path} read {sent:,} bytes of a {whole:,}-byte set"
    assert "90,001\u201390,025" in text(client.get("/retries?offset=90000"))


def test_a_set_jobs_link_follows_the_job_once_it_has_moved(client: Client, api: Api,
                                                          r: redis.Redis) -> None:
    """A retry's detail link, opened after the job was retried, shows where it is now."""
    r.sadd("queues", "default")
    r.zadd("retry", {failed(jid_of(7)): time.time() + 600})
    listing = text(client.get("/retries"))
    link = re.findall(r'<a href="(/retries/[^"]+)"', listing)[0].replace("&amp;", "&")
    assert f"jid={jid_of(7)}" in link
    assert jid_of(7) in text(client.get(link))  # still there: its own page
    api.retries.apply("retry", api.retries.page().jobs)  # to its queue
    moved = client.get(link, follow_redirects=True)
    assert moved.status_code == 200
    body = text(moved)
    assert "no longer at that place in the retries set" in body
    assert "waiting in queue default at position 1 of 1" in body
    job = r.rpop("queue:default")  # failed again: a new entry in the retry set
    assert job is not None
    r.zadd("retry", {failed(jid_of(7), retry_count=1): time.time() + 900})
    body = text(client.get(link, follow_redirects=True))
    assert "in the retry set" in body and "Open in retries" in body
    r.delete("retry")  # finished, or deleted: held nowhere
    body = text(client.get(link, follow_redirects=True))
    assert f"jid {jid_of(7)}: not found" in body
    # An old link without a jid still answers 404.
    assert client.get(link.partition("?")[0]).status_code == 404
