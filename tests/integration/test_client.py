"""The producer side: payload building, push, bulk push, scheduling, middleware, the Job API
and the default client. Pushes go to the real session redis-server (``r``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
import redis

import rfetch
from rfetch.config import Config
from rfetch.errors import ArgsNotSerializable, ConfigError, PayloadTooLarge
from rfetch.jobs.payload import Payload
from rfetch.push.buffer import BufferedJob
from rfetch.push.client import DEFAULT, Client
from rfetch.push.sink import Send
from tests.support.redis_server import RedisServer

SIDEKIQ_FIELDS = ["retry", "queue", "class", "args", "jid", "created_at", "enqueued_at"]


@pytest.fixture
def client(config: Config, r: redis.Redis) -> Client:
    return Client(config, redis=r)


@pytest.fixture
def default_client(client: Client) -> Iterator[Client]:
    """Make ``client`` the process-wide default for the test, then put the old one back."""
    previous = DEFAULT._client
    DEFAULT.set(client)
    yield client
    DEFAULT.set(previous)


def queue_payloads(r: redis.Redis, queue: str = "default", prefix: str = "") -> list[Payload]:
    """The jobs of a queue, next to run first (consumers take the right end)."""
    raws = r.lrange(f"{prefix}queue:{queue}", 0, -1)
    return [json.loads(raw) for raw in reversed(raws)]


def is_jid(value: object) -> bool:
    return isinstance(value, str) and len(value) == 24 and int(value, 16) >= 0


# -- Client.build ---------------------------------------------------------------------------


def test_build_has_sidekiqs_fields_in_sidekiqs_order(client: Client) -> None:
    before = time.time()
    payload = client.build("app.jobs.Welcome", [42, "hi"], {}, None)
    assert list(payload) == SIDEKIQ_FIELDS
    assert payload["retry"] is True
    assert payload["queue"] == "default"
    assert payload["class"] == "app.jobs.Welcome"
    assert payload["args"] == [42, "hi"]
    assert is_jid(payload["jid"])
    assert before <= payload["created_at"] == payload["enqueued_at"] <= time.time()


def test_build_scheduled_has_at_and_no_enqueued_at(client: Client) -> None:
    at = time.time() + 600
    payload = client.build("X", [], {}, at)
    assert list(payload) == [*SIDEKIQ_FIELDS[:-1], "at"]
    assert payload["at"] == at


def test_build_past_at_runs_now(client: Client) -> None:
    payload = client.build("X", [], {}, time.time() - 5)
    assert list(payload) == SIDEKIQ_FIELDS


def test_build_carries_options(client: Client) -> None:
    payload = client.build(
        "X",
        (1,),
        {
            "queue": "mail",
            "retry": 3,
            "dead": False,
            "backtrace": 20,
            "retry_queue": "slow",
            "tags": ("a", "b"),
            "jid": "f" * 24,
        },
        None,
    )
    assert payload["queue"] == "mail"
    assert payload["retry"] == 3
    assert payload["dead"] is False
    assert payload["backtrace"] == 20
    assert payload["retry_queue"] == "slow"
    assert payload["tags"] == ["a", "b"]
    assert payload["jid"] == "f" * 24
    assert payload["args"] == [1]
    assert list(payload)[:6] == SIDEKIQ_FIELDS[:6]
    assert list(payload)[-1] == "enqueued_at"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"queu": "mail"}, "unknown job option"),
        ({"at": 5}, "unknown job option"),
        ({"queue": ""}, "queue"),
        ({"queue": 5}, "queue"),
        ({"retry": "yes"}, "retry"),
        ({"retry": -1}, "retry"),
        ({"retry": 2.5}, "retry"),
        ({"tags": "urgent"}, "tags"),
        ({"tags": ["ok", 1]}, "tags"),
    ],
)
def test_bad_options_raise_and_write_nothing(
    client: Client, r: redis.Redis, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        client.push("X", [1], options)
    with pytest.raises(ConfigError, match=message):
        client.push_bulk("X", [[1], [2]], options)
    assert r.dbsize() == 0


def test_bad_args_raise_and_write_nothing(client: Client, r: redis.Redis) -> None:
    with pytest.raises(ArgsNotSerializable, match=r"args\[1\]\['when'\]"):
        client.push("X", [1, {"when": dt.datetime.now()}])
    assert r.dbsize() == 0


# -- push -----------------------------------------------------------------------------------


def test_push_lpushes_the_payload_and_adds_the_queue(client: Client, r: redis.Redis) -> None:
    first = client.push("app.Welcome", [1, "a"])
    second = client.push("app.Welcome", [2, "b"])
    third = client.push("app.Mail", [], {"queue": "mail"})
    assert is_jid(first) and is_jid(second) and is_jid(third)
    assert len({first, second, third}) == 3

    jobs = queue_payloads(r)
    assert [j["jid"] for j in jobs] == [first, second]  # FIFO: the first pushed runs first
    assert [j["args"] for j in jobs] == [[1, "a"], [2, "b"]]
    assert all(list(j) == SIDEKIQ_FIELDS for j in jobs)
    assert [j["jid"] for j in queue_payloads(r, "mail")] == [third]
    assert r.smembers("queues") == {b"default", b"mail"}
    assert set(r.keys("*")) == {b"queue:default", b"queue:mail", b"queues"}


def test_push_stores_compact_utf8_json(client: Client, r: redis.Redis) -> None:
    client.push("X", ["é☃", {"k": [1.5, None, True]}])
    raw = r.lindex("queue:default", 0)
    assert raw is not None
    assert "é☃".encode() in raw  # not \u escapes
    assert b", " not in raw and b": " not in raw


def test_payload_limit_writes_nothing(config: Config, r: redis.Redis) -> None:
    client = Client(config.replace(max_payload_bytes=256), redis=r)
    client.push("X", ["x" * 100])
    r.flushall()
    with pytest.raises(PayloadTooLarge):
        client.push("X", ["x" * 300])
    assert r.dbsize() == 0


# -- push_bulk ------------------------------------------------------------------------------


def test_push_bulk_writes_in_one_step(client: Client, r: redis.Redis) -> None:
    batches: list[int] = []

    class Counting:
        """A sink that counts each write's jobs and writes them to Redis."""

        def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool] | None:
            batches.append(len(jobs))
            return send(jobs)

    client = Client(client.config, client.redis, sink=Counting())
    jids = client.push_bulk("app.Bulk", [[i] for i in range(2500)])
    assert batches == [2500]  # the whole call is one atomic write
    assert len(set(jids)) == 2500 and all(is_jid(j) for j in jids)
    jobs = queue_payloads(r)
    assert [j["jid"] for j in jobs] == jids  # FIFO
    assert [j["args"] for j in jobs] == [[i] for i in range(2500)]
    assert r.smembers("queues") == {b"default"}

    batches.clear()
    client.push_bulk("app.Bulk", [[i] for i in range(5)], batch_size=2)
    assert batches == [2, 2, 1]


def test_push_bulk_with_one_bad_arg_writes_nothing(client: Client, r: redis.Redis) -> None:
    args_list: list[list[Any]] = [[i] for i in range(1500)] + [[object()]]
    with pytest.raises(ArgsNotSerializable):
        client.push_bulk("app.Bulk", args_list)
    assert r.dbsize() == 0


def test_push_bulk_with_one_oversized_job_writes_nothing(config: Config, r: redis.Redis) -> None:
    client = Client(config.replace(max_payload_bytes=512), redis=r)
    args_list: list[list[Any]] = [[i] for i in range(1500)] + [["x" * 1000]]
    with pytest.raises(PayloadTooLarge):
        client.push_bulk("app.Bulk", args_list)
    assert r.dbsize() == 0


@pytest.mark.parametrize(
    ("args_list", "options", "message"),
    [
        ([[1], 2], {}, "list of argument lists"),
        ([[1], "ab"], {}, "list of argument lists"),
        ([[1]], {"jid": "a" * 24}, "jid"),
    ],
)
def test_push_bulk_rejects_bad_input(
    client: Client, r: redis.Redis, args_list: list[Any], options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        client.push_bulk("X", args_list, options)
    assert r.dbsize() == 0


# -- scheduled pushes -----------------------------------------------------------------------


def scheduled(r: redis.Redis, prefix: str = "") -> list[tuple[Payload, float]]:
    return [(json.loads(m), s) for m, s in r.zrange(f"{prefix}schedule", 0, -1, withscores=True)]


def test_push_at_writes_schedule_with_score_and_without_at(client: Client, r: redis.Redis) -> None:
    at = time.time() + 3600.25
    jid = client.push("app.Later", [1], at=at)
    [(job, score)] = scheduled(r)
    assert score == at
    assert job["jid"] == jid
    assert "at" not in job and "enqueued_at" not in job
    assert list(job) == SIDEKIQ_FIELDS[:-1]
    assert set(r.keys("*")) == {b"schedule"}  # no queue list and no `queues` entry yet


def test_perform_in_and_perform_at(default_client: Client, r: redis.Redis) -> None:
    class Reminder(rfetch.Job):
        queue = "mail"

        def perform(self, user_id: int) -> None:
            pass

    before = time.time()
    in_jid = Reminder.perform_in(30, 1)
    delta_jid = Reminder.perform_in(dt.timedelta(minutes=2), 2)
    after = time.time()
    when = dt.datetime(2999, 1, 2, 3, 4, 5, 250000, tzinfo=dt.timezone.utc)
    at_jid = Reminder.perform_at(when, 3)
    epoch_jid = Reminder.perform_at(32503680000.5, 4)

    got = {job["jid"]: (job, score) for job, score in scheduled(r)}
    assert set(got) == {in_jid, delta_jid, at_jid, epoch_jid}
    assert before + 30 <= got[in_jid][1] <= after + 30
    assert before + 120 <= got[delta_jid][1] <= after + 120
    assert got[at_jid][1] == when.timestamp()
    assert got[epoch_jid][1] == 32503680000.5
    for job, _ in got.values():
        assert "at" not in job and "enqueued_at" not in job
        assert job["queue"] == "mail"
    assert r.llen("queue:mail") == 0


def test_perform_at_in_the_past_runs_now(default_client: Client, r: redis.Redis) -> None:
    class Now(rfetch.Job):
        def perform(self) -> None:
            pass

    jid = Now.perform_at(time.time() - 60)
    assert r.zcard("schedule") == 0
    [job] = queue_payloads(r)
    assert job["jid"] == jid and list(job) == SIDEKIQ_FIELDS


def test_bad_run_times_raise(default_client: Client, r: redis.Redis) -> None:
    class Any_(rfetch.Job):
        def perform(self) -> None:
            pass

    with pytest.raises(ConfigError):
        Any_.perform_in("soon")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Any_.perform_at("tomorrow")  # type: ignore[arg-type]
    assert r.dbsize() == 0


# -- client middleware ----------------------------------------------------------------------


def test_client_middleware_can_modify_and_stop_a_push(config: Config, r: redis.Redis) -> None:
    calls: list[tuple[str, str, str, bool]] = []

    def outer(
        job_class: str,
        job: Payload,
        queue: str,
        redis_client: redis.Redis,
        call_next: Callable[[], Payload | None],
    ) -> Payload | None:
        calls.append(("outer", job_class, queue, redis_client is r))
        job["tags"] = ["audited"]
        job["trace_id"] = "t-1"
        return call_next()

    def inner(
        job_class: str,
        job: Payload,
        queue: str,
        redis_client: redis.Redis,
        call_next: Callable[[], Payload | None],
    ) -> Payload | None:
        calls.append(("inner", job_class, queue, "trace_id" in job))
        if job["args"] == ["stop"]:
            return None
        return call_next()

    client = Client(config.replace(client_middleware=[outer, inner]), redis=r)
    assert client.push("app.Stopped", ["stop"], {"queue": "mail"}) is None
    assert r.dbsize() == 0
    assert calls == [("outer", "app.Stopped", "mail", True), ("inner", "app.Stopped", "mail", True)]

    jid = client.push("app.Kept", ["go"])
    [job] = queue_payloads(r)
    assert job["jid"] == jid
    assert job["tags"] == ["audited"] and job["trace_id"] == "t-1"

    r.flushall()
    jids = client.push_bulk("app.Bulk", [["go"], ["stop"], ["go"]])
    assert len(jids) == 2
    assert [j["jid"] for j in queue_payloads(r)] == jids


# -- namespace ------------------------------------------------------------------------------


def test_namespace_prefixes_every_key(config: Config, r: redis.Redis) -> None:
    client = Client(config.replace(namespace="ns"), redis=r)
    client.push("X", [1])
    client.push("X", [2], {"queue": "mail"}, at=time.time() + 60)
    client.push_bulk("X", [[3], [4]], {"queue": "bulk"})
    assert set(r.keys("*")) == {b"ns:queue:default", b"ns:queue:bulk", b"ns:queues", b"ns:schedule"}
    assert r.smembers("ns:queues") == {b"default", b"bulk"}
    assert [j["args"] for j in queue_payloads(r, "bulk", prefix="ns:")] == [[3], [4]]
    assert [j["args"] for j, _ in scheduled(r, prefix="ns:")] == [[2]]


# -- the Job API ----------------------------------------------------------------------------

SENT: list[tuple[str, int]] = []


@rfetch.job(queue="mail", retry=3)
def send_mail(address: str, count: int) -> str:
    SENT.append((address, count))
    return f"sent {count} to {address}"


@rfetch.job
def plain_job() -> None:
    SENT.append(("plain", 0))


@rfetch.job(name="LegacyMailer")
def named_job() -> None:
    pass


def test_job_decorator_names_and_runs_inline(default_client: Client, r: redis.Redis) -> None:
    SENT.clear()
    assert send_mail.job_class.job_name() == f"{__name__}.send_mail"
    assert plain_job.job_class.job_name() == f"{__name__}.plain_job"
    assert named_job.job_class.job_name() == "LegacyMailer"
    assert send_mail.__name__ == "send_mail"
    assert issubclass(send_mail.job_class, rfetch.Job)

    assert send_mail("a@example.com", 2) == "sent 2 to a@example.com"
    assert SENT == [("a@example.com", 2)]
    assert r.dbsize() == 0  # calling it ran it here, pushed nothing

    send_mail.job_class().perform("b@example.com", 3)  # what a worker calls
    assert SENT[-1] == ("b@example.com", 3)


def test_job_decorator_perform_async_pushes(default_client: Client, r: redis.Redis) -> None:
    SENT.clear()
    jid = send_mail.perform_async("a@example.com", 1)
    plain_jid = plain_job.perform_async()
    assert SENT == []
    [job] = queue_payloads(r, "mail")
    assert job["jid"] == jid
    assert job["class"] == f"{__name__}.send_mail"
    assert job["args"] == ["a@example.com", 1]
    assert job["retry"] == 3
    [plain] = queue_payloads(r)
    assert plain["jid"] == plain_jid and plain["retry"] is True

    override = send_mail.set(queue="urgent").perform_async("c@example.com", 9)
    assert [j["jid"] for j in queue_payloads(r, "urgent")] == [override]


def test_job_decorator_rejects_unknown_options() -> None:
    with pytest.raises(ConfigError, match="unknown job option"):
        rfetch.job(queueue="x")


class Welcome(rfetch.Job):
    queue = "mail"
    retry = 5
    tags = ("welcome",)

    def perform(self, user_id: int, template: str) -> None:
        pass


def test_job_class_pushes_with_its_options(default_client: Client, r: redis.Redis) -> None:
    jid = Welcome.perform_async(42, "welcome")
    [job] = queue_payloads(r, "mail")
    assert job["jid"] == jid
    assert job["class"] == f"{__name__}.Welcome"
    assert job["retry"] == 5 and job["tags"] == ["welcome"]
    jids = Welcome.perform_bulk([[1, "a"], [2, "b"]])
    assert [j["jid"] for j in queue_payloads(r, "mail")] == [jid, *jids]


def test_set_overrides_options_for_one_push(client: Client, r: redis.Redis) -> None:
    jid = Welcome.set(queue="critical", retry=False, client=client).perform_async(7, "x")
    [job] = queue_payloads(r, "critical")
    assert job["jid"] == jid and job["retry"] is False and job["tags"] == ["welcome"]

    chained = Welcome.set(client=client, queue="critical").set(retry=0, jid="ab" * 12)
    assert chained.perform_async(8, "y") == "ab" * 12
    assert queue_payloads(r, "critical")[-1]["retry"] == 0

    # The class itself is unchanged.
    plain = Welcome.set(client=client).perform_async(9, "z")
    [job] = queue_payloads(r, "mail")
    assert job["jid"] == plain and job["retry"] == 5
    assert Welcome.queue == "mail" and Welcome.retry == 5

    with pytest.raises(ConfigError, match="unknown job option"):
        Welcome.set(priorty=1)  # misspelt: priority is an option


def test_configure_sets_the_default_client(
    redis_server: RedisServer, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("RFETCH_"):
            monkeypatch.delenv(name)
    previous = DEFAULT._client
    try:
        configured = rfetch.configure(redis_url=redis_server.url, namespace="cfg")
        assert DEFAULT.get() is configured
        assert configured.config.redis_url == redis_server.url
        jid = Welcome.perform_async(1, "a")
        assert [j["jid"] for j in queue_payloads(r, "mail", prefix="cfg:")] == [jid]

        base = Config(redis_url=redis_server.url)
        again = rfetch.configure(base, namespace="two")
        assert DEFAULT.get() is again and again.config.namespace == "two"
        Welcome.perform_async(2, "b")
        assert r.llen("two:queue:mail") == 1
        configured.redis.close()
        again.redis.close()
    finally:
        DEFAULT.set(previous)
