"""The read/admin API on a real Redis: every read checked against what was written,
every action checked for its effect on Redis.

Jobs are written the way their producers write them: rfetch's client, or raw Sidekiq-style
JSON (Ruby's compact form, Sidekiq 8 millisecond timestamps, ActiveJob wrappers), so the API
is shown to read Sidekiq's data model and not only rfetch's own output.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from rfetch.api import (
    ACTIVEJOB_WRAPPER,
    Api,
    JobFilter,
    JobRecord,
    ProcessNotFound,
)
from rfetch.config import Config
from rfetch.observability.stats import BUCKETS_MS
from rfetch.push.client import Client
from rfetch.store.keys import Keys
from tests.support.redis_server import RedisServer
from tests.support.ruby import needs_ruby, ruby
from tests.support.seed import jid_of, payload
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

KEYS = Keys()

FAST_ENV = {
    "RFETCH_HEARTBEAT_INTERVAL": "0.3",
    "RFETCH_POLL_INTERVAL_AVERAGE": "0.2",
    "RFETCH_POLL_INITIAL_WAIT": "0",
    "RFETCH_BLOCK_TIMEOUT": "0.3",
}


def jids(records: list[JobRecord]) -> list[str | None]:
    return [r.jid for r in records]


@pytest.fixture
def api(config: Config, r: redis.Redis) -> Api:
    return Api(config, redis=r)


# -- stats -------------------------------------------------------------------------------


def test_stats_reads_counters_sizes_and_live_heartbeats(api: Api, r: redis.Redis) -> None:
    today = time.strftime("%Y-%m-%d", time.gmtime())
    r.mset({"stat:processed": 100, "stat:failed": 7,
            f"stat:processed:{today}": 10, f"stat:failed:{today}": 2,
            "stat:processed:2001-01-01": 55})
    r.sadd("queues", "a", "b", "empty")
    r.lpush("queue:a", *[payload(jid_of(i)) for i in range(3)])
    r.lpush("queue:b", *[payload(jid_of(i)) for i in range(2)])
    r.zadd("schedule", {payload(jid_of(1)): 1})
    r.zadd("retry", {payload(jid_of(2)): 1, payload(jid_of(3)): 2})
    r.zadd("dead", {payload(jid_of(i)): i for i in range(4)})
    r.sadd("processes", "h:1:aaa", "h:2:bbb", "h:3:gone")
    r.hset("h:1:aaa", mapping={"busy": 3, "beat": time.time(), "info": "{}"})
    r.hset("h:2:bbb", mapping={"busy": 2, "beat": time.time(), "info": "{}"})

    stats = api.stats()

    assert (stats.processed, stats.failed) == (100, 7)
    assert (stats.processed_today, stats.failed_today) == (10, 2)
    assert stats.enqueued == 5
    assert stats.queues == {"a": 3, "b": 2, "empty": 0}
    assert (stats.scheduled_size, stats.retry_size, stats.dead_size) == (1, 2, 4)
    assert stats.processes == 2  # h:3:gone is listed but its heartbeat is gone
    assert stats.busy == 5


def test_history_is_one_entry_per_utc_day_newest_first(api: Api, r: redis.Redis) -> None:
    r.mset({"stat:processed:2024-03-01": 5, "stat:failed:2024-03-01": 1,
            "stat:processed:2024-02-28": 9})
    history = api.history(4, end=dt.date(2024, 3, 1))
    assert [(d.date, d.processed, d.failed) for d in history] == [
        ("2024-03-01", 5, 1),
        ("2024-02-29", 0, 0),  # leap day, no key: zero
        ("2024-02-28", 9, 0),
        ("2024-02-27", 0, 0),
    ]
    with pytest.raises(ValueError):
        api.history(0)


def test_namespace_keeps_to_its_own_keys(redis_server: RedisServer, r: redis.Redis) -> None:
    Client(Config(redis_url=redis_server.url, namespace="ns"), r).push("app.A", [1])
    Client(Config(redis_url=redis_server.url), r).push("app.B", [2], {"queue": "other"})
    r.zadd("ns:retry", {payload(jid_of(1), "app.R"): 1})
    api = Api(redis=r, namespace="ns")
    assert [q.name for q in api.queues()] == ["default"]
    assert api.stats().enqueued == 1 and api.stats().retry_size == 1
    assert api.queue("default").page().jobs[0].job_class == "app.A"
    pubsub = r.pubsub()
    pubsub.subscribe("ns:rfetch:pause")
    assert pubsub.get_message(timeout=2)["type"] == "subscribe"
    api.queue("default").pause()
    assert r.smembers("ns:paused") == {b"default"} and not r.exists("paused")
    assert pubsub.get_message(timeout=2)["data"] == b"pause default"
    pubsub.close()


# -- queues ------------------------------------------------------------------------------


def test_queue_size_latency_and_sidekiq_payloads(api: Api, r: redis.Redis) -> None:
    now = time.time()
    # Oldest job at the right end. Sidekiq 7 writes float seconds, Sidekiq 8 integer ms.
    r.lpush("queue:s7", payload(jid_of(1), enqueued_at=now - 30.0, created_at=now - 31.0))
    r.lpush("queue:s7", payload(jid_of(2), enqueued_at=now - 1.0))
    aj_args = [{"job_class": "SendWelcomeJob", "job_id": "x", "arguments": [42, "hi"]}]
    r.lpush("queue:s8", payload(jid_of(3), ACTIVEJOB_WRAPPER, aj_args, "s8",
                                enqueued_at=int((now - 90) * 1000),
                                created_at=int((now - 95) * 1000)))
    r.sadd("queues", "s7", "s8", "never-pushed")
    r.lpush("queue:broken", "not json")
    r.sadd("queues", "broken")

    infos = {q.name: q for q in api.queues()}

    assert infos["s7"].size == 2 and infos["s7"].latency == pytest.approx(30, abs=5)
    assert infos["s8"].latency == pytest.approx(90, abs=5)
    assert infos["never-pushed"].size == 0 and infos["never-pushed"].latency == 0.0
    assert infos["broken"].latency == 0.0
    assert api.queue("s8").latency() == pytest.approx(90, abs=5)
    [aj] = api.queue("s8").page().jobs
    assert aj.job_class == "SendWelcomeJob" and aj.payload_class == ACTIVEJOB_WRAPPER
    assert aj.display_args == [42, "hi"] and aj.args == aj_args
    assert aj.enqueued_at == pytest.approx(now - 90, abs=0.01)
    assert aj.created_at == pytest.approx(now - 95, abs=0.01)
    assert aj.queue == "s8" and aj.position == 0


def test_pause_and_unpause_write_the_set_and_announce_it(api: Api, r: redis.Redis) -> None:
    pubsub = r.pubsub()
    pubsub.subscribe(KEYS.pause_channel)
    assert pubsub.get_message(timeout=2)["type"] == "subscribe"
    queue = api.queue("mail")

    assert queue.pause() is True
    assert r.smembers("paused") == {b"mail"}
    assert pubsub.get_message(timeout=2)["data"] == b"pause mail"
    assert queue.pause() is False  # already paused: the set is unchanged
    assert pubsub.get_message(timeout=2)["data"] == b"pause mail"
    assert queue.is_paused()
    assert [(q.name, q.paused) for q in api.queues()] == [("mail", True)]  # listed though empty

    assert queue.unpause() is True
    assert r.smembers("paused") == set()
    assert pubsub.get_message(timeout=2)["data"] == b"unpause mail"
    assert not queue.is_paused()
    pubsub.close()


def test_queue_pages_from_the_job_that_runs_next(
    api: Api, r: redis.Redis, config: Config
) -> None:
    client = Client(config, r)
    pushed = client.push_bulk("app.Job", [[i, f"user-{i}"] for i in range(2500)])
    queue = api.queue("default")

    page = queue.page(1200, 10)
    assert jids(page.jobs) == pushed[1200:1210]  # first pushed runs first
    assert [j.position for j in page.jobs] == list(range(1200, 1210))
    assert page.total == 2500 and page.next_offset == 1210 and page.scanned == 10

    newest = queue.page(0, 3, newest_first=True)
    assert jids(newest.jobs) == pushed[::-1][:3]
    assert [j.position for j in newest.jobs] == [2499, 2498, 2497]

    last = queue.page(2495, 10)
    assert jids(last.jobs) == pushed[2495:] and last.next_offset is None

    hits = queue.page(0, 5, job_filter=JobFilter(grep='"USER-77'))
    assert [j.args for j in hits.jobs] == [[77, "user-77"]] + [
        [i, f"user-{i}"] for i in range(770, 774)
    ]
    assert hits.complete and hits.next_offset == 774

    bounded = queue.page(0, 5, job_filter=JobFilter(grep="user-2400"), max_scan=1000)
    assert bounded.jobs == [] and not bounded.complete and bounded.next_offset == 1000
    found = queue.page(bounded.next_offset or 0, 5, job_filter=JobFilter(grep="user-2400"),
                       max_scan=2000)
    assert jids(found.jobs) == [pushed[2400]] and found.complete


def test_queue_delete_and_clear(api: Api, r: redis.Redis, config: Config) -> None:
    pushed = Client(config, r).push_bulk("app.Job", [[i] for i in range(6)])
    queue = api.queue("default")
    r.sadd("paused", "default")

    result = queue.delete([pushed[2], "f" * 24])
    assert result.done == 1 and result.missing == ["f" * 24]
    record = queue.page(0, 1).jobs[0]
    assert queue.delete([record]).done == 1
    assert queue.delete([record]).missing == [pushed[0]]  # already gone
    remaining = [json.loads(x)["jid"] for x in r.lrange("queue:default", 0, -1)]
    assert sorted(remaining) == sorted([pushed[1], *pushed[3:]])

    matching = queue.delete_matching(JobFilter(grep="[4]"))
    assert matching.done == 1 and matching.complete
    assert r.llen("queue:default") == 3

    assert queue.clear() == 3
    assert not r.exists("queue:default")
    assert not r.sismember("queues", "default")
    assert r.sismember("paused", "default")  # clearing does not unpause


def test_find_in_a_queue_is_bounded(api: Api, r: redis.Redis) -> None:
    r.lpush("queue:big", *[payload(jid_of(i), args=[{"jid": "decoy"}]) for i in range(3000)])
    queue = api.queue("big")
    found = queue.find(jid_of(2500), max_scan=1000)
    assert found.records == [] and not found.complete and found.scanned == 1000
    found = queue.find(jid_of(2500), max_scan=None)
    assert [(r.jid, r.position) for r in found.records] == [(jid_of(2500), 2500)]
    assert found.complete and found.scanned == 3000
    assert queue.find("decoy").records == []  # a "jid" inside args is not the job's jid


# -- sorted sets -------------------------------------------------------------------------


@pytest.fixture
def big_retry_set(r: redis.Redis) -> int:
    """200,000 retry entries; entry i has score 1,000,000 + i and jid_of(i)."""
    size = 200_000
    for start in range(0, size, 20_000):
        r.zadd("retry", {
            payload(jid_of(i), "app.Big", [i], retry_count=i % 7, error_message=f"e{i}"):
            1_000_000 + i
            for i in range(start, start + 20_000)
        })
    return size


def test_a_set_of_200000_pages_by_rank_and_by_score_window(
    api: Api, big_retry_set: int
) -> None:
    retries = api.retries
    assert retries.size() == big_retry_set

    page = retries.page(150_000, 5)
    assert jids(page.jobs) == [jid_of(i) for i in range(150_000, 150_005)]
    assert [j.score for j in page.jobs] == [1_000_000.0 + i for i in range(150_000, 150_005)]
    assert [j.position for j in page.jobs] == list(range(150_000, 150_005))
    assert page.scanned == 5 and page.next_offset == 150_005

    latest = retries.page(10, 3, reverse=True)
    assert jids(latest.jobs) == [jid_of(i) for i in (199_989, 199_988, 199_987)]

    window = retries.page(2, 3, min_score=1_150_000.5, max_score=1_150_010)
    assert window.total == 10  # 150,001 .. 150,010
    assert jids(window.jobs) == [jid_of(i) for i in (150_003, 150_004, 150_005)]
    back = retries.page(0, 2, reverse=True, min_score=1_150_000.5, max_score=1_150_010)
    assert jids(back.jobs) == [jid_of(150_010), jid_of(150_009)]

    assert retries.page(big_retry_set, 5).jobs == []

    nothing = retries.page(0, 5, job_filter=JobFilter(job_class="Other"), max_scan=5000)
    assert nothing.jobs == [] and nothing.scanned == 5000 and not nothing.complete

    [deep] = retries.find(jid_of(199_998)).records
    assert deep.score == 1_199_998.0 and deep.position == 199_998
    assert retries.fetch(1_123_456.0, jid_of(123_456)) is not None
    assert retries.fetch(1_123_456.0, jid_of(1)) is None


def test_filters_by_class_and_by_text_of_args_or_error(api: Api, r: redis.Redis) -> None:
    aj_args = [{"job_class": "SendWelcomeJob", "arguments": ["user-7"]}]
    r.zadd("dead", {
        payload(jid_of(1), ACTIVEJOB_WRAPPER, aj_args, error_message="x"): 1,
        payload(jid_of(2), "myapp.jobs.SendWelcome", [1], error_message="Read TIMEOUT"): 2,
        payload(jid_of(3), "myapp.jobs.Other", ["user-7"], error_message="nope"): 3,
        'not json at all, "user-7"': 4,
    })
    dead = api.dead

    def matching(**kw: Any) -> list[str | None]:
        return jids(dead.page(0, 10, job_filter=JobFilter(**kw)).jobs)

    assert matching(job_class="SendWelcomeJob") == [jid_of(1)]
    assert matching(job_class="SendWelcome") == [jid_of(2)]  # last part of the name
    assert matching(job_class="myapp.jobs.SendWelcome") == [jid_of(2)]
    assert matching(job_class="Welcome") == []
    assert matching(grep="timeout") == [jid_of(2)]
    assert matching(grep='"user-7"') == [jid_of(1), jid_of(3), None]
    assert matching(job_class="Other", grep="user-7") == [jid_of(3)]
    assert [j.job_class for j in dead.page().jobs][-1] == "(invalid)"


def test_text_filter_does_not_depend_on_the_producers_json_style(
    api: Api, r: redis.Redis
) -> None:
    # Python's json.dumps defaults (spaces, \u escapes) and Ruby's float style (1.0e+20):
    # the filter reads the job, not the bytes, so the same words match either way.
    r.zadd("retry", {
        json.dumps({"class": "app.Py", "args": ["Café", 1e20], "jid": jid_of(1)}): 1,
        '{"class":"app.Rb","args":["caf\u00e9",1.0e+20],"jid":"' + jid_of(2) + '"}': 2,
    })

    def matching(grep: str) -> list[str | None]:
        return jids(api.retries.page(job_filter=JobFilter(grep=grep)).jobs)

    assert matching("café") == [jid_of(1), jid_of(2)]
    assert matching("CAF") == [jid_of(1), jid_of(2)]
    assert matching('"café",1e+20') == [jid_of(1), jid_of(2)]
    assert matching("1e+20") == [jid_of(1), jid_of(2)]
    assert matching("caf\\u") == []


def test_sort_by_retry_count_is_descending_and_bounded(api: Api, r: redis.Redis) -> None:
    counts = [(i * 37) % 50 for i in range(50)]  # a permutation of 0..49
    r.zadd("retry", {payload(jid_of(i), retry_count=c): i for i, c in enumerate(counts)})
    retries = api.retries

    worst = retries.page(0, 5, sort="retry_count")
    assert [j.retry_count for j in worst.jobs] == [49, 48, 47, 46, 45]
    assert worst.next_offset == 5 and worst.complete
    assert [j.retry_count for j in retries.page(5, 3, sort="retry_count").jobs] == [44, 43, 42]
    assert [j.retry_count for j in retries.page(0, 3, sort="retry_count", reverse=True).jobs] \
        == [0, 1, 2]
    assert retries.page(48, 5, sort="retry_count").next_offset is None

    bounded = retries.page(0, 3, sort="retry_count", max_scan=10)
    assert [j.retry_count for j in bounded.jobs] == sorted(counts[:10], reverse=True)[:3]
    assert not bounded.complete and bounded.scanned == 10
    with pytest.raises(ValueError, match="sort"):
        retries.page(sort="size")


# -- actions -----------------------------------------------------------------------------


def test_retry_pushes_to_the_queue_with_fresh_enqueued_at(api: Api, r: redis.Redis) -> None:
    r.zadd("retry", {
        payload(jid_of(1), "app.A", [1], "q7", retry_count=3, enqueued_at=5.0,
                created_at=1.5, error_class="E"): 10,
        # Sidekiq 8: integer milliseconds stay milliseconds.
        payload(jid_of(2), "app.B", [2], "q8", retry_count=0,
                created_at=1_700_000_000_000): 20,
    })
    before = api.ctx.redis_time()

    result = api.retries.retry([jid_of(1), jid_of(2)])

    after = api.ctx.redis_time()
    assert result.done == 2 and result.missing == [] and result.complete
    assert r.zcard("retry") == 0
    assert r.smembers("queues") == {b"q7", b"q8"}
    [moved7] = [json.loads(x) for x in r.lrange("queue:q7", 0, -1)]
    assert moved7["retry_count"] == 2  # Sidekiq: a manual retry does not use up an attempt
    assert before <= moved7["enqueued_at"] <= after
    assert moved7["created_at"] == 1.5 and moved7["args"] == [1] and moved7["error_class"] == "E"
    [moved8] = [json.loads(x) for x in r.lrange("queue:q8", 0, -1)]
    assert moved8["retry_count"] == -1  # as Ruby's `msg["retry_count"] -= 1` (0 is truthy)
    assert isinstance(moved8["enqueued_at"], int)
    assert before * 1000 - 1 <= moved8["enqueued_at"] <= after * 1000 + 1


def test_an_action_on_a_job_already_moved_does_nothing(api: Api, r: redis.Redis) -> None:
    r.zadd("retry", {payload(jid_of(1), queue="q"): 1})
    [record] = api.retries.page().jobs
    r.zrem("retry", record.raw)  # the poller (or another admin) moved it meanwhile

    for action in ("retry", "add_to_queue", "kill", "delete"):
        result = api.retries.apply(action, [record])
        assert result.done == 0 and result.missing == [jid_of(1)]
    assert r.llen("queue:q") == 0 and r.zcard("dead") == 0

    assert api.retries.retry([jid_of(9)]).missing == [jid_of(9)]


def test_selection_and_all_matching(api: Api, r: redis.Redis) -> None:
    r.zadd("retry", {
        payload(jid_of(i), "app.A" if i % 2 else "app.B", [i], "q"): i for i in range(2500)
    })
    retries = api.retries

    picked = retries.retry([jid_of(1), jid_of(3), jid_of(4)])
    assert picked.done == 3
    assert sorted(json.loads(x)["jid"] for x in r.lrange("queue:q", 0, -1)) == [
        jid_of(1), jid_of(3), jid_of(4)
    ]

    deleted = retries.apply_matching("delete", JobFilter(job_class="app.B"))
    assert deleted.done == 1249 and deleted.complete and deleted.scanned == 2497
    assert all(json.loads(x)["class"] == "app.A" for x in r.zrange("retry", 0, -1))

    bounded = retries.apply_matching("add_to_queue", JobFilter(grep="[2499]"), max_scan=10)
    assert bounded.done == 1 and not bounded.complete and bounded.scanned == 10

    everything = retries.apply_matching("retry")
    assert everything.done == 1247  # 1,250 A's less 2 retried by jid and 1 added above
    assert r.zcard("retry") == 0
    in_queue = [json.loads(x)["jid"] for x in r.lrange("queue:q", 0, -1)]
    assert len(in_queue) == len(set(in_queue)) == 3 + 1 + 1247


def test_kill_moves_to_the_dead_set_trimmed_like_the_worker(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    died: list[tuple[str, str]] = []
    config = Config(redis_url=redis_server.url, dead_max_jobs=3, dead_timeout=1000.0,
                    death_handlers=[lambda job, exc: died.append((job["jid"], str(exc)))])
    api = Api(config, redis=r)
    now = time.time()
    r.zadd("dead", {payload(jid_of(100)): now - 5000,  # older than dead_timeout
                    payload(jid_of(101)): now - 30, payload(jid_of(102)): now - 20})
    r.zadd("retry", {payload(jid_of(1)): 1, payload(jid_of(2)): 2, payload(jid_of(3)): 3})
    r.zadd("schedule", {payload(jid_of(4)): now + 60})

    assert api.retries.kill([jid_of(1), jid_of(2)]).done == 2
    assert api.scheduled.kill([jid_of(4)]).done == 1

    dead = [json.loads(x)["jid"] for x in r.zrange("dead", 0, -1)]
    assert dead == [jid_of(1), jid_of(2), jid_of(4)]  # capped at 3; the oldest trimmed
    assert r.zcard("retry") == 1 and r.zcard("schedule") == 0
    assert sorted(died) == [(jid_of(i), "Job killed by API") for i in (1, 2, 4)]
    assert r.zrange("dead", 0, 0, withscores=True)[0][1] == pytest.approx(time.time(), abs=5)
    with pytest.raises(ValueError, match="dead"):
        api.dead.apply("kill", [jid_of(1)])


def test_add_to_queue_keeps_the_payload_and_delete_removes(api: Api, r: redis.Redis) -> None:
    r.zadd("schedule", {payload(jid_of(1), "app.S", [1], "later", retry_count=2): 50})
    r.zadd("dead", {"garbage{": 1, payload(jid_of(2), queue="q"): 2})

    assert api.scheduled.add_to_queue([jid_of(1)]).done == 1
    [moved] = [json.loads(x) for x in r.lrange("queue:later", 0, -1)]
    assert moved["retry_count"] == 2 and moved["class"] == "app.S" and "enqueued_at" in moved

    invalid = api.dead.page().jobs[0]
    assert not invalid.valid and invalid.jid is None
    assert api.dead.retry([invalid]).skipped == ["(invalid)"]
    assert r.zcard("dead") == 2
    assert api.dead.delete([invalid]).done == 1
    assert api.dead.delete([jid_of(2)]).done == 1
    assert r.zcard("dead") == 0 and r.llen("queue:q") == 0


# -- processes ---------------------------------------------------------------------------


def test_processes_are_read_from_heartbeats(api: Api, r: redis.Redis) -> None:
    info = {"hostname": "web-1", "started_at": 1_700_000_000.5, "pid": 42, "tag": "app",
            "concurrency": 10, "queues": ["default", "mail"], "labels": ["x"],
            "identity": "web-1:42:abc", "version": "0.1.0"}
    r.sadd("processes", "web-1:42:abc", "web-2:7:dead")
    r.hset("web-1:42:abc", mapping={"info": json.dumps(info), "busy": 1, "beat": 1234.5,
                                    "quiet": "true", "rss": 20480, "rtt_us": 150})
    r.hset("web-1:42:abc:work", "1a2b", json.dumps(
        {"queue": "mail", "payload": payload(jid_of(5), "app.Mail", [1], "mail"),
         "run_at": 1_700_000_100}))
    r.hset("rfetch:identities", "web-2:7:dead", '["default"]')

    [process] = api.processes.all()
    assert process.identity == "web-1:42:abc" and process.alive
    assert (process.hostname, process.pid, process.tag) == ("web-1", 42, "app")
    assert process.started_at == 1_700_000_000.5 and process.concurrency == 10
    assert process.queues == ["default", "mail"] and process.labels == ["x"]
    assert (process.busy, process.beat, process.quiet) == (1, 1234.5, True)
    assert (process.rss_kb, process.rtt_us) == (20480, 150)
    [running] = process.running
    assert (running.thread_id, running.queue, running.run_at) == ("1a2b", "mail", 1_700_000_100)
    assert running.job.jid == jid_of(5) and running.job.job_class == "app.Mail"
    assert [p.alive for p in api.processes.all(include_dead=True)] == [True, False]
    assert api.stats().processes == 1 and api.processes.size() == 1


def test_quiet_stop_and_cleanup(api: Api, r: redis.Redis) -> None:
    r.sadd("processes", "a:1:x", "b:2:y")
    r.hset("a:1:x", "beat", 1)
    r.hset("rfetch:identities", mapping={"a:1:x": "[]", "b:2:y": '["default"]'})

    api.processes.quiet("a:1:x")
    api.processes.stop("a:1:x")
    assert r.lrange("a:1:x-signals", 0, -1) == [b"TERM", b"TSTP"]  # RPOP takes TSTP first
    assert 0 < r.ttl("a:1:x-signals") <= 60
    api.processes.quiet("b:2:y")  # listed, not yet cleaned up: Sidekiq signals it too
    with pytest.raises(ProcessNotFound):
        api.processes.stop("c:3:z")
    assert not r.exists("c:3:z-signals")

    assert api.processes.cleanup() == ["b:2:y"]
    assert r.smembers("processes") == {b"a:1:x"}
    # Orphan recovery still needs to find b's private lists.
    assert r.hgetall("rfetch:identities") == {b"a:1:x": b"[]", b"b:2:y": b'["default"]'}


def test_a_real_worker_is_seen_quieted_and_stopped_through_the_api(
    api: Api, r: redis.Redis, redis_server: RedisServer, config: Config, tmp_path: Path
) -> None:
    worker = WorkerProcess(redis_server.url, ["-r", "testjobs", "-c", "2", "-t", "1"],
                           env={**FAST_ENV, "RFETCH_TEST_RECORD": str(tmp_path / "rec")},
                           log_dir=tmp_path)
    try:
        identity = worker.identity(r)
        jid = Client(config, r).push("testjobs.Sleep", [30])
        wait_for(lambda: bool(api.processes.running()), 10, "the job to show as running")
        [process] = api.processes.all()
        assert process.identity == identity and process.pid == worker.pid
        assert [j.job.jid for j in process.running] == [jid]
        assert api.explain(jid).state == "running"
        assert f"running on process {identity} (alive)" in api.explain(jid).summary

        api.processes.quiet(identity)
        wait_for(lambda: api.processes.all()[0].quiet, 10, "the process to go quiet")
        api.processes.stop(identity)
        assert worker.wait(15) == 0
    finally:
        worker.signal(signal.SIGKILL)
    # -t 1: the sleeping job was pushed back to the head of its queue.
    answer = api.explain(jid)
    assert answer.state == "queued" and answer.locations[0].position == 0
    assert "no live process works queue default" in answer.summary


# -- class counts and metrics ------------------------------------------------------------


def test_class_counts_everywhere_a_job_can_be(api: Api, r: redis.Redis) -> None:
    r.lpush("queue:q", *[payload(jid_of(i), "A" if i < 5 else "B") for i in range(8)])
    r.sadd("queues", "q")
    r.zadd("retry", {payload(jid_of(10), "A"): 1, payload(jid_of(11), "A"): 2})
    r.zadd("schedule", {payload(jid_of(12), "C"): 1})
    r.zadd("dead", {"junk": 1})
    r.sadd("processes", "h:1:a")
    r.hset("h:1:a", "beat", 1)
    r.hset("h:1:a:work", "t1", json.dumps({"queue": "q", "payload": payload(jid_of(13), "D")}))

    counts = {c.location: c for c in api.class_counts()}
    assert counts["queue:q"].counts == {"A": 5, "B": 3} and counts["queue:q"].complete
    assert counts["retry"].counts == {"A": 2}
    assert counts["schedule"].counts == {"C": 1}
    assert counts["dead"].counts == {"(invalid)": 1}
    assert counts["running"].counts == {"D": 1}

    bounded = {c.location: c for c in api.class_counts(max_scan=4)}["queue:q"]
    assert bounded.counts == {"A": 4}  # the 4 that run next: the first pushed
    assert bounded.scanned == 4 and bounded.total == 8 and not bounded.complete


def test_class_metrics_sum_the_last_minutes(api: Api, r: redis.Redis) -> None:
    now = time.time()
    minute = time.strftime("%Y%m%d%H%M", time.gmtime(now))
    earlier = time.strftime("%Y%m%d%H%M", time.gmtime(now - 600))
    too_old = time.strftime("%Y%m%d%H%M", time.gmtime(now - 3 * 3600))
    r.hset(f"rfetch:metrics:{minute}", mapping={"A|p": 8, "A|f": 1, "A|b0": 8})
    r.hset(f"rfetch:metrics:{earlier}", mapping={"A|p": 2, f"A|b{len(BUCKETS_MS)}": 2, "B|p": 1,
                                                 "B|b4": 1})
    r.hset(f"rfetch:metrics:{too_old}", mapping={"A|p": 100})

    a, b = api.class_metrics(60)
    assert (a.job_class, a.processed, a.failed) == ("A", 10, 1)
    assert a.p50_ms == 1.0 and a.p95_ms == float("inf")  # 2 of 10 above the last bound
    assert (b.job_class, b.processed, b.p99_ms) == ("B", 1, 20.0)
    assert api.class_metrics(5)[0].processed == 8
    assert a.to_dict()["p95_ms"] is None


# -- explain -----------------------------------------------------------------------------


def test_explain_a_queued_job_in_a_paused_queue(api: Api, r: redis.Redis) -> None:
    r.lpush("queue:mail", *[payload(jid_of(i), queue="mail") for i in range(5)])
    r.sadd("queues", "mail")
    r.sadd("paused", "mail")
    r.sadd("processes", "w:1:a")
    r.hset("w:1:a", mapping={"beat": 1, "info": json.dumps({"queues": ["mail"]})})

    answer = api.explain(jid_of(3))
    assert answer.state == "queued" and answer.found
    [where] = answer.locations
    assert (where.queue, where.position, where.queue_size, where.paused) == ("mail", 3, 5, True)
    assert answer.summary == (
        f"jid {jid_of(3)}: waiting in queue mail at position 4 of 5 (1 runs next): "
        "queue mail is paused, so no worker takes jobs from it"
    )
    r.srem("paused", "mail")
    assert api.explain(jid_of(3)).summary.endswith(": 3 job(s) run before it")


def test_explain_scheduled_retry_and_dead(api: Api, r: redis.Redis) -> None:
    now = time.time()
    r.zadd("schedule", {payload(jid_of(1), queue="later"): now + 3600})
    r.zadd("retry", {payload(jid_of(2), retry_count=4, error_class="IOError",
                             error_message="disk full"): now + 120})
    r.zadd("dead", {payload(jid_of(3), retry_count=25, error_class="KeyError",
                            error_message="'user'"): now - 86400})

    scheduled = api.explain(jid_of(1))
    assert scheduled.state == "scheduled" and scheduled.locations[0].at == now + 3600
    assert "scheduled to run at" in scheduled.summary
    assert "(in an hour)" in scheduled.summary or "(in 59 minutes)" in scheduled.summary
    assert "then goes to queue later" in scheduled.summary
    retry = api.explain(jid_of(2))
    assert retry.state == "retry"
    assert "after 5 failure(s) (retry_count 4): next retry at" in retry.summary
    assert "last error: IOError: disk full" in retry.summary
    dead = api.explain(jid_of(3))
    assert dead.state == "dead" and "KeyError: 'user'" in dead.summary
    assert "(a day ago)" in dead.summary


def test_explain_jobs_held_in_private_lists(api: Api, r: redis.Redis) -> None:
    # A live process holding a prefetched job, and a dead one (no heartbeat) holding another.
    r.sadd("processes", "live:1:a")
    r.hset("live:1:a", mapping={"beat": 1, "info": json.dumps({"queues": ["q"]})})
    r.hset("rfetch:identities", mapping={"live:1:a": '["q"]', "dead:2:b": '["q"]'})
    r.lpush("queue:sq|live:1:a|q", payload(jid_of(1), queue="q"))
    r.lpush("queue:sq|dead:2:b|q", payload(jid_of(2), queue="q"))
    # An unknown process (not in any rfetch hash) found only by the SCAN fallback.
    r.lpush("queue:sq|ghost:3:c|q|with|bars", payload(jid_of(3), queue="q|with|bars"))

    held = api.explain(jid_of(1))
    assert held.state == "held" and held.locations[0].alive is True
    assert "held by process live:1:a in its private list for queue q (alive" in held.summary
    dead = api.explain(jid_of(2))
    assert dead.locations[0].alive is False and dead.locations[0].identity == "dead:2:b"
    assert "(dead: heartbeat expired; orphan recovery will push it back to queue q)" \
        in dead.summary
    ghost = api.explain(jid_of(3))
    assert ghost.state == "held" and ghost.locations[0].identity == "ghost:3:c"
    assert ghost.locations[0].queue == "q|with|bars"


def test_explain_not_found_says_when_the_bound_was_hit(api: Api, r: redis.Redis) -> None:
    r.lpush("queue:big", *[payload(jid_of(i)) for i in range(3000)])
    r.sadd("queues", "big")

    missing = api.explain("f" * 24)
    assert missing.state == "not_found" and not missing.found and missing.incomplete == []
    assert "not found" in missing.summary

    bounded = api.explain(jid_of(2500), max_scan=1000)
    assert not bounded.found and bounded.incomplete == ["queue big"]
    assert bounded.lines()[-1].startswith("search bound (max_scan) hit in: queue big")
    assert api.explain(jid_of(2500), max_scan=None).locations[0].position == 2500


# -- check -------------------------------------------------------------------------------


def test_check_thresholds(api: Api, r: redis.Redis) -> None:
    now = time.time()
    r.lpush("queue:slow", payload(jid_of(1), enqueued_at=now - 120))
    r.lpush("queue:big", *[payload(jid_of(i), enqueued_at=now) for i in range(20)])
    r.sadd("queues", "slow", "big")

    ok = api.check(max_latency=600, max_size=100)
    assert ok.ok and ok.message.startswith("OK 2 queue(s); largest big 20 jobs")
    late = api.check(max_latency=60)
    assert not late.ok and late.message.startswith("CRITICAL queue slow latency is 12")
    both = api.check(max_latency=60, max_size=10)
    assert both.message == "CRITICAL queue big has 20 jobs (max 10) (+1 more)"
    assert api.check(max_latency=60, queue="big").ok
    assert api.check(max_size=0, queue="nowhere").ok


# -- Ruby Sidekiq on the same Redis --------------------------------------------------------


@pytest.mark.ruby
@needs_ruby
def test_jobs_pushed_by_ruby_sidekiq_are_read_and_moved(
    api: Api, r: redis.Redis, redis_server: RedisServer
) -> None:
    pushed = ruby(
        redis_server.url,
        'now = Sidekiq::Client.push("class" => "HardJob", "args" => [1, "x"], "queue" => "rb")\n'
        'later = Sidekiq::Client.push("class" => "HardJob", "args" => [2], "queue" => "rb",'
        ' "at" => Time.now.to_f + 3600)\n'
        "puts JSON.generate({now: now, later: later})",
    )
    [queued] = api.queue("rb").page().jobs
    assert (queued.jid, queued.job_class, queued.args) == (pushed["now"], "HardJob", [1, "x"])
    assert queued.enqueued_at == pytest.approx(time.time(), abs=30)
    assert api.queue("rb").latency() < 30
    [scheduled] = api.scheduled.page().jobs
    assert scheduled.jid == pushed["later"]
    assert scheduled.score == pytest.approx(time.time() + 3600, abs=30)
    assert api.explain(pushed["later"]).state == "scheduled"

    assert api.scheduled.add_to_queue([pushed["later"]]).done == 1

    seen = ruby(
        redis_server.url,
        'q = Sidekiq::Queue.new("rb")\n'
        "puts JSON.generate({size: q.size, jids: q.map(&:jid), args: q.map(&:args),"
        " scheduled: Sidekiq::ScheduledSet.new.size, latency: q.latency})",
    )
    assert seen["size"] == 2 and seen["scheduled"] == 0
    assert seen["jids"] == [pushed["later"], pushed["now"]] and seen["args"] == [[2], [1, "x"]]
    assert 0 <= seen["latency"] < 30
