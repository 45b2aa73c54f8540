"""Ruby Sidekiq reading and writing rfetch's jobs in a Redis Cluster style ``{tag}``
namespace, through the redis-namespace gem (Debian's ``ruby-redis-namespace``, which
Sidekiq 6.4 uses when its Redis config has ``namespace:``). Sidekiq 7 dropped namespace
support; with it the keys must be read without a namespace."""

from __future__ import annotations

import pytest
import redis

import rfetch
from rfetch.api import Api
from rfetch.config import Config
from tests.support.redis_server import RedisServer
from tests.support.ruby import needs_ruby_namespace, ruby

NAMESPACE = "{shop}"

NAMESPACED = (
    'require "redis-namespace"\n'
    "Sidekiq.configure_client do |c|\n"
    f'  c.redis = {{url: ENV["REDIS_URL"], namespace: "{NAMESPACE}"}}\n'
    "end\n"
)


@pytest.mark.ruby
@needs_ruby_namespace
def test_sidekiq_with_a_matching_namespace_reads_rfetch_jobs(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    config = Config(redis_url=redis_server.url, namespace=NAMESPACE)
    client = rfetch.Client(config)
    jids = [client.push("SendMail", [n], {"queue": "mail"}) for n in (1, 2)]
    later = client.push("Report", ["weekly"], at=4_102_444_800.0)  # 2100-01-01
    assert r.llen(f"{NAMESPACE}:queue:mail") == 2  # every key in the tag's one slot

    seen = ruby(
        redis_server.url,
        NAMESPACED
        + 'mail = Sidekiq::Queue.new("mail")\n'
        "stats = Sidekiq::Stats.new\n"
        "puts JSON.generate({queues: Sidekiq::Queue.all.map(&:name), size: mail.size,\n"
        "  jids: mail.map(&:jid), args: mail.map(&:args), enqueued: stats.enqueued,\n"
        "  scheduled: Sidekiq::ScheduledSet.new.map(&:jid)})",
    )
    assert seen["queues"] == ["mail"]
    assert seen["size"] == 2
    assert seen["enqueued"] == 2
    assert sorted(seen["jids"]) == sorted(jids)
    assert sorted(seen["args"]) == [[1], [2]]
    assert seen["scheduled"] == [later]


@pytest.mark.ruby
@needs_ruby_namespace
def test_rfetch_reads_what_sidekiq_pushed_into_the_namespace(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    pushed = ruby(
        redis_server.url,
        NAMESPACED
        + 'jid = Sidekiq::Client.push("class" => "HardJob", "args" => [7], "queue" => "mail")\n'
        "puts JSON.generate({jid: jid})",
    )
    assert r.exists(f"{NAMESPACE}:queue:mail")
    api = Api(Config(redis_url=redis_server.url, namespace=NAMESPACE))
    assert api.stats().enqueued == 1
    [record] = api.queue("mail").page(0, 10).jobs
    assert record.jid == pushed["jid"]
    assert record.args == [7]
