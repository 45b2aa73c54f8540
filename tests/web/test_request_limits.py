"""What a request gives is normalised and bounded: redirect targets, body size and paging
numbers. A bad value gets the page's default or a clear 4xx, never an off-site redirect, a
500 or a misleading "cannot read Redis"."""

from __future__ import annotations

import pytest
import redis
from werkzeug.test import Client

from tests.support.seed import jid_of
from tests.support.web import failed, payload, post, text


@pytest.mark.parametrize("target", [
    "/\t/evil.example/",      # browsers drop tabs and newlines: //evil.example/
    "/\n/evil.example/",
    "/\r\n/evil.example/",
    "/ /evil.example/",
    "/\x00/evil.example/",
    "/\x7f/evil.example/",
    "/\u2028/evil.example/",  # a line separator is no path character either
    "/queues?x=\r\nSet-Cookie: a=b",
    "/" + "a" * 5000,
])
def test_next_with_control_characters_falls_back_to_the_page(
    client: Client, r: redis.Redis, target: str
) -> None:
    r.sadd("queues", "mail")
    response = post(client, "/queues/mail", {"action": "pause", "next": target})
    assert response.status_code == 303
    assert response.headers["Location"] == "/queues/mail"
    assert r.sismember("paused", "mail")


def test_a_plain_next_path_is_still_followed(client: Client, r: redis.Redis) -> None:
    r.sadd("queues", "mail")
    response = post(client, "/queues/mail", {"action": "pause", "next": "/queues?x=1"})
    assert response.headers["Location"] == "/queues?x=1"


def test_a_large_body_is_refused_with_413_before_it_is_read(client: Client,
                                                             r: redis.Redis) -> None:
    r.sadd("queues", "mail")
    big = b"x" * (2 * 1024 * 1024)
    for path, content_type in (("/queues/mail", "application/octet-stream"),
                               ("/queues/mail", "application/x-www-form-urlencoded"),
                               ("/queues", "application/json")):
        response = client.post(path, data=big, content_type=content_type)
        assert response.status_code == 413, (path, content_type)
    assert not r.sismember("paused", "mail")


@pytest.mark.parametrize("offset", ["99999999999999999999999", "9223372036854775807",
                                    "-99999999999999999999", "1e400", "٣", "0x10"])
def test_out_of_range_paging_numbers_are_clamped(client: Client, r: redis.Redis,
                                                 offset: str) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", payload(jid_of(1)))
    r.zadd("retry", {failed(jid_of(2)): 1})
    for path in ("/queues/default", "/retries", "/retries?sort=retry_count", "/dead"):
        joiner = "&" if "?" in path else "?"
        response = client.get(f"{path}{joiner}offset={offset}&limit={offset}")
        body = text(response)
        assert response.status_code == 200, (path, body[:300])
        assert "Cannot read Redis" not in body


def test_a_huge_offset_shows_an_empty_page(client: Client, r: redis.Redis) -> None:
    r.sadd("queues", "default")
    r.lpush("queue:default", payload(jid_of(1)))
    body = text(client.get("/queues/default?offset=99999999999999999999999"))
    assert jid_of(1) not in body
    assert jid_of(1) in text(client.get("/queues/default?offset=0"))
