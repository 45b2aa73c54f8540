"""The FastAPI example (examples/fastapi_app): a push through the app, the web UI under
its mount, and the app's tests in rfetch's fake mode."""

from __future__ import annotations

import json

import pytest
import redis

pytest.importorskip("fastapi", reason="FastAPI is not installed")
pytest.importorskip("httpx", reason="httpx is not installed (FastAPI's TestClient needs it)")

from fastapi.testclient import TestClient

import rfetch
from examples.fastapi_app.app import create
from examples.fastapi_app.jobs import SendWelcome
from rfetch import testing
from rfetch.config import Config


def test_a_signup_pushes_a_job_and_the_ui_shows_its_queue(config: Config, r: redis.Redis) -> None:
    with TestClient(create(config)) as client:
        response = client.post("/signups", json={"user_id": 42, "email": "ann@example.com"})
        assert response.status_code == 200
        jid = response.json()["jid"]
        [raw] = r.lrange("queue:mail", 0, -1)
        job = json.loads(raw)
        assert (job["jid"], job["class"], job["args"]) == (
            jid, SendWelcome.job_name(), [42, "ann@example.com"]
        )
        page = client.get("/rfetch/queues")
        assert page.status_code == 200
        assert 'href="/rfetch/queues/mail"' in page.text


def test_the_apps_own_tests_use_a_fake_client(config: Config, r: redis.Redis) -> None:
    queues = testing.FakeQueues(config)
    app = create(config, client=rfetch.Client(config, sink=queues))
    with TestClient(app) as client:
        client.post("/signups", json={"user_id": 7, "email": "bo@example.com"})
    assert [j["args"] for j in queues.jobs(SendWelcome)] == [[7, "bo@example.com"]]
    assert queues.drain() == 1  # the async perform, awaited
    assert r.llen("queue:mail") == 0  # nothing reached Redis
