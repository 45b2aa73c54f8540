"""A bulk push takes argument lists or signatures of its job (``Job.s(...)``, typed from
``perform``), and checks every one against ``perform`` before anything is written. No Redis:
the client points at a port nobody listens on and its ``push_bulk`` is replaced."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import pytest

import rfetch
from rfetch.config import Config
from rfetch.errors import ArgsMismatch, ConfigError
from rfetch.push.client import Client


@pytest.fixture(autouse=True)
def collect_local_jobs() -> Iterator[None]:
    yield
    gc.collect()


class SendWelcome(rfetch.Job):
    def perform(self, user_id: int, template: str = "welcome") -> None: ...


class Other(rfetch.Job):
    def perform(self, user_id: int) -> None: ...


@rfetch.job
def send_receipt(order_id: int) -> None: ...


@pytest.fixture
def pushed(monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The argument lists that reach ``Client.push_bulk`` (none is written)."""
    lists: list[list[Any]] = []

    def push_bulk(self: Client, name: str, arg_lists: list[Any], *_: Any, **__: Any) -> list[str]:
        lists.extend(list(a) for a in arg_lists)
        return ["j"] * len(arg_lists)

    monkeypatch.setattr(Client, "push_bulk", push_bulk)
    return lists


@pytest.fixture
def client() -> Client:
    return Client(Config(redis_url="redis://127.0.0.1:1/0"))


def test_signatures_and_lists_push_their_arguments(client: Client, pushed: list[list[Any]]) -> None:
    SendWelcome.set(client=client).perform_bulk(
        [SendWelcome.s(1, "a"), [2], SendWelcome.s(3, template="b")]
    )
    send_receipt.set(client=client).perform_bulk([send_receipt.s(7)])
    assert pushed == [[1, "a"], [2], [3, "b"], [7]]


def test_a_signature_of_another_job_is_refused_whole(
    client: Client, pushed: list[list[Any]]
) -> None:
    with pytest.raises(ConfigError, match="a bulk push is of one job"):
        SendWelcome.set(client=client).perform_bulk([[1], Other.s(2)])
    assert pushed == []


def test_a_signature_with_options_is_refused_whole(
    client: Client, pushed: list[list[Any]]
) -> None:
    with pytest.raises(ConfigError, match="give them to set"):
        SendWelcome.set(client=client).perform_bulk([[1], SendWelcome.s(2).set(queue="q")])
    assert pushed == []


def test_every_bulk_form_checks_each_list_against_perform(
    client: Client, pushed: list[list[Any]]
) -> None:
    with pytest.raises(ArgsMismatch, match="got 2"):
        send_receipt.set(client=client).perform_bulk([[1], [1, 2]])
    with pytest.raises(ArgsMismatch, match="got 0"):
        Other.set(client=client).perform_bulk([[1], []])
    with pytest.raises(ArgsMismatch, match="got 3"):
        asyncio.run(SendWelcome.set(client=client).aperform_bulk([[1], [1, "a", "b"]]))
    assert pushed == []
