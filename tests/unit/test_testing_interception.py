"""Test modes intercept every client: one built by an application factory (sync and
asyncio, in another thread), a batch's, a Django-style client whose own sink defers pushes
to a commit; and nothing they cannot hold reaches Redis silently. No Redis here: the unit
tier's guard fails any connection, sync or asyncio."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence

import pytest

import rfetch
from rfetch import testing
from rfetch.config import Config
from rfetch.push.buffer import BufferedJob
from rfetch.push.client import DEFAULT, Client
from rfetch.push.sink import Send

# What an application factory builds: a Client of its own, never the default one. The
# port refuses connections, so a push that escaped would be buffered, not written.
APP_CONFIG = Config(redis_url="redis://127.0.0.1:1/0", push_exit_timeout=0)


class Signup(rfetch.Job):
    queue = "mail"

    def perform(self, user_id: int) -> None:
        pass


class AsyncSignup(rfetch.Job):
    async def perform(self, user_id: int) -> None:
        await asyncio.sleep(0)


class HoldingSink:
    """A sink that holds pushes until ``commit()`` and drops them on ``rollback()``: the
    Django integration's on-commit sink, without a database."""

    def __init__(self) -> None:
        self.held: list[tuple[list[BufferedJob], Send]] = []

    def write(self, jobs: Sequence[BufferedJob], send: Send) -> list[bool]:
        self.held.append((list(jobs), send))
        return [True] * len(jobs)

    def commit(self) -> None:
        held, self.held = self.held, []
        for jobs, send in held:
            send(jobs)

    def rollback(self) -> None:
        self.held = []


@pytest.fixture
def app_client() -> Iterator[Client]:
    client = Client(APP_CONFIG)
    yield client
    assert client.pending() == 0, "a push escaped the test mode to the reliable-push buffer"


def test_a_client_built_by_an_app_factory_pushes_to_the_fake(
    rfetch_fake: testing.FakeQueues, app_client: Client
) -> None:
    jid = Signup.set(client=app_client).perform_async(1)
    assert [j["jid"] for j in rfetch_fake.jobs(Signup)] == [jid]
    assert rfetch_fake.drain() == 1


def test_an_asyncio_push_of_an_app_client_goes_to_the_fake(
    rfetch_fake: testing.FakeQueues, app_client: Client
) -> None:
    async def endpoint() -> str | None:
        return await AsyncSignup.set(client=app_client).aperform_async(2)

    jid = asyncio.run(endpoint())
    assert [j["jid"] for j in rfetch_fake.jobs(AsyncSignup)] == [jid]


def test_a_push_from_another_thread_is_intercepted(
    rfetch_fake: testing.FakeQueues, app_client: Client
) -> None:
    # A test client (Starlette's TestClient, a WSGI server) runs the app in another thread.
    thread = threading.Thread(target=lambda: Signup.set(client=app_client).perform_async(3))
    thread.start()
    thread.join()
    rfetch_fake.assert_enqueued(Signup, args=[3])


def test_inline_mode_runs_an_app_clients_asyncio_push(app_client: Client) -> None:
    async def endpoint() -> str | None:
        return await AsyncSignup.set(client=app_client).aperform_async(4)

    with testing.inline() as runner:
        asyncio.run(endpoint())
    assert [p["args"] for p in runner.performed] == [[4]]


def test_a_fastapi_app_factory_client_is_intercepted(rfetch_fake: testing.FakeQueues) -> None:
    pytest.importorskip("fastapi", reason="FastAPI is not installed")
    pytest.importorskip("httpx", reason="httpx is not installed")
    from fastapi.testclient import TestClient

    from examples.fastapi_app.app import create
    from examples.fastapi_app.jobs import SendWelcome

    app = create(APP_CONFIG)  # the factory builds its own rfetch.Client(config)
    with TestClient(app) as http:
        response = http.post("/signups", json={"user_id": 7, "email": "bo@example.com"})
    assert response.status_code == 200
    rfetch_fake.assert_enqueued(SendWelcome, args=[7, "bo@example.com"], queue="mail")
    assert rfetch_fake.drain() == 1


def test_a_batch_of_an_app_client_goes_to_the_fake(
    rfetch_fake: testing.FakeQueues, app_client: Client
) -> None:
    batch = rfetch.Batch(client=app_client)
    with batch.jobs():
        Signup.set(client=app_client).perform_async(5)
    rfetch_fake.assert_enqueued(Signup, args=[5])


def test_a_dependent_push_raises_instead_of_reaching_redis(
    rfetch_fake: testing.FakeQueues, app_client: Client
) -> None:
    with pytest.raises(rfetch.ConfigError, match="test modes"):
        Signup.set(client=app_client, after="a" * 24).perform_async(6)


def test_a_clients_own_deferring_sink_runs_first_then_the_fake(app_client: Client) -> None:
    # As the Django integration does: the default client defers pushes to the commit.
    holding = HoldingSink()
    before = DEFAULT.swap(Client(APP_CONFIG, sink=holding))
    try:
        with testing.fake() as queues:
            Signup.perform_async(1)
            assert queues.jobs() == []  # not before the commit
            holding.rollback()
            holding.commit()
            assert queues.jobs() == []  # rolled back: never recorded
            Signup.perform_async(2)
            holding.commit()
            queues.assert_enqueued(Signup, args=[2], count=1)
            Signup.set(client=app_client).perform_async(3)  # an immediate client
            queues.assert_enqueued(Signup, args=[3])
    finally:
        DEFAULT.swap(before)


def test_a_push_held_for_a_commit_after_the_block_still_goes_to_its_fake() -> None:
    holding = HoldingSink()
    before = DEFAULT.swap(Client(APP_CONFIG, sink=holding))
    try:
        with testing.fake() as queues:
            Signup.perform_async(8)
        holding.commit()  # the transaction outlived the fake block
        queues.assert_enqueued(Signup, args=[8])
        assert DEFAULT.get().pending() == 0
    finally:
        DEFAULT.swap(before)


def test_the_interception_ends_with_the_block() -> None:
    from rfetch.push.sink import INTERCEPTION

    with testing.fake():
        with testing.inline() as runner:
            assert INTERCEPTION.current() is runner
        assert isinstance(INTERCEPTION.current(), testing.FakeQueues)
    assert INTERCEPTION.current() is None
