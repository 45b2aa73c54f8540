"""settings.RFETCH read into a Config (no Django project needed: only the dict is read)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("django")

from rfetch.config import Config, QueueSpec
from rfetch.errors import ConfigError
from rfetch.integrations.django.settings import (
    apply_to_worker,
    config_from_settings,
    split_settings,
)


def audit(job_class: str, job: dict[str, Any], queue: str, redis: Any, call_next: Any) -> Any:
    return call_next()


def test_settings_become_a_config_and_options() -> None:
    config, options = config_from_settings({
        "redis_url": "redis://cache:6379/2",
        "namespace": "shop",
        "queues": ["mail,2", "default"],
        "client_middleware": ["tests.unit.test_django_settings.audit"],
        "on_commit": False,
        "web": {"read_only": True, "login_url": "/accounts/login/"},
    })
    assert (config.redis_url, config.namespace) == ("redis://cache:6379/2", "shop")
    assert config.queues == (QueueSpec("mail", 2), QueueSpec("default"))
    assert config.client_middleware == [audit]
    assert not options.on_commit and options.database == "default"
    assert options.login_url == "/accounts/login/"
    assert options.web_app_options == {"read_only": True}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"redis": "x"}, "unknown key"),
        ({"queues": "mail"}, "must be a list"),
        ({"server_middleware": ["no.such.thing"]}, "cannot import"),
        ({"web": {"colour": "red"}}, "takes the keys"),
        ({"concurrency": 0}, "concurrency"),
    ],
)
def test_bad_settings_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_settings(values)


def test_a_worker_keeps_its_command_line_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("RFETCH_CONCURRENCY", raising=False)
    worker = Config(concurrency=20, queues=[QueueSpec("default")])  # -c 20, no -q
    apply_to_worker(worker, {"concurrency": 3, "queues": ["mail"], "namespace": "shop",
                             "server_middleware": [audit]})
    assert worker.concurrency == 20  # given on the command line
    assert worker.queues == (QueueSpec("mail"),)  # not given: from the settings
    assert worker.namespace == "shop"
    assert worker.server_middleware == [audit]


def test_the_metrics_token_is_the_views_not_create_apps() -> None:
    _, options = split_settings({"web": {"metrics_token": "s3cret", "title": "Jobs"}})
    assert options.metrics_token == "s3cret"
    assert options.web_app_options == {"title": "Jobs"}
    assert split_settings({})[1].metrics_token is None
