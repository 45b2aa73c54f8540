"""Options and payload fields of fetch caps, expiring jobs and max_queue_size, without Redis:
their checks (a clear ConfigError where they are given), the payload the client builds, the
routing fields a worker reads, and the environment form of max_queue_size."""

from __future__ import annotations

import pytest

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.jobs.options import check_options
from rfetch.jobs.payload import Routing, dumps
from rfetch.push.client import Client


@pytest.mark.parametrize(
    "options",
    [
        {"concurrency_key": "k"},
        {"concurrency_limit": 3},
        {"concurrency_key": "", "concurrency_limit": 3},
        {"concurrency_key": "a|b", "concurrency_limit": 3},
        {"concurrency_key": "k" * 1001, "concurrency_limit": 3},
        {"concurrency_key": "k", "concurrency_limit": 0},
        {"concurrency_key": "k", "concurrency_limit": True},
        {"concurrency_key": "k", "concurrency_limit": 2.0},
        {"concurrency_key": "k", "concurrency_limit": 2, "key": "post:1"},
        {"concurrency_key": "k", "concurrency_limit": 2, "tenant": "acme"},
        {"expires_in": 0},
        {"expires_in": -1},
        {"expires_in": float("inf")},
        {"expires_in": "5m"},
    ],
)
def test_bad_flow_options_are_config_errors(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        check_options(options)


def test_the_client_writes_the_cap_and_the_expiry_and_a_worker_reads_them() -> None:
    client = Client(Config())
    payload = client.build(
        "app.Report", [1], {"concurrency_key": "tenant:42", "concurrency_limit": 3,
                            "expires_in": 60}, None, now=1000.0,
    )
    assert payload["concurrency_key"] == "tenant:42"
    assert payload["concurrency_limit"] == 3
    assert payload["expires_at"] == 1060.0
    routing = Routing.parse(dumps(payload, 10_000))
    assert routing is not None and routing.capped and routing.locking and routing.gated
    assert (routing.concurrency_key, routing.concurrency_limit) == ("tenant:42", 3)
    later = client.build("app.Report", [1], {"expires_in": 60}, 5000.0, now=1000.0)
    assert later["expires_at"] == 5060.0  # counted from the run time of a scheduled job


def test_a_payload_without_a_usable_limit_is_not_capped() -> None:
    for limit in (0, -2, 1.5, "3", None, True):
        text = (f'{{"class":"a","jid":"j","concurrency_key":"k",'
                f'"concurrency_limit":{limit if not isinstance(limit, str) else repr(limit)}}}')
        routing = Routing.parse(text.replace("None", "null").replace("True", "true")
                                .replace("'", '"'))
        assert routing is not None and not routing.capped


def test_max_queue_size_from_the_environment_and_its_checks() -> None:
    config = Config.from_env({"RFETCH_MAX_QUEUE_SIZE": "mail=10000, reports=5"})
    assert config.max_queue_size == {"mail": 10000, "reports": 5}
    with pytest.raises(ConfigError, match="RFETCH_MAX_QUEUE_SIZE wants queue=size pairs"):
        Config.from_env({"RFETCH_MAX_QUEUE_SIZE": "mail"})
    with pytest.raises(ConfigError, match="max_queue_size of queue 'mail'"):
        Config(max_queue_size={"mail": 0})


def test_class_level_and_decorator_options_travel_in_the_payload() -> None:
    import rfetch

    class Sync(rfetch.Job):
        concurrency_key = "erp"
        concurrency_limit = 20
        expires_in = 30.0

        def perform(self, account: int) -> None: ...

    @rfetch.job(concurrency_key="mail", concurrency_limit=2)
    def send(to: str) -> None: ...

    client = Client(Config())
    options = Sync.default_options()
    payload = client.build(Sync.job_name(), [1], options, None, now=10.0)
    assert (payload["concurrency_key"], payload["concurrency_limit"]) == ("erp", 20)
    assert payload["expires_at"] == 40.0
    overridden = client.build("x", [1], {**options, "concurrency_limit": 5}, None, now=10.0)
    assert overridden["concurrency_limit"] == 5
    assert send.job_class.default_options()["concurrency_key"] == "mail"
