"""Fixtures of the web UI tests: a seeded Redis, the app, and a Werkzeug test client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from werkzeug.test import Client

from rfetch.api import Api
from rfetch.config import Config
from rfetch.web import WebApp, create_app


@pytest.fixture
def api(config: Config, r: redis.Redis) -> Api:
    return Api(config, redis=r)


@pytest.fixture
def make_app(config: Config, r: redis.Redis) -> Callable[..., WebApp]:
    def build(**options: Any) -> WebApp:
        options.setdefault("basic_auth", False)
        return create_app(config, redis=r, **options)

    return build


@pytest.fixture
def app(make_app: Callable[..., WebApp]) -> WebApp:
    return make_app()


@pytest.fixture
def client(app: WebApp) -> Client:
    return Client(app)
