"""A push whose arguments do not fit the job's ``perform`` is refused at the push (a clear
ArgsMismatch, nothing written) instead of failing in the worker on every retry.

The client here points at a port nobody listens on, and the unit tier fails any attempt to
connect: every refused push below is refused before Redis is reached.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import rfetch
from rfetch.config import Config
from rfetch.errors import ArgsMismatch
from rfetch.push.client import Client


@pytest.fixture(autouse=True)
def collect_local_jobs() -> Iterator[None]:
    """Job classes defined in a test must not outlive it in ``Job.__subclasses__()``."""
    yield
    gc.collect()


@pytest.fixture
def client() -> Client:
    return Client(Config(redis_url="redis://127.0.0.1:1/0"))


class SendWelcome(rfetch.Job):
    def perform(self, user_id: int, template: str = "welcome") -> None: ...


class Notify(rfetch.Job):
    def perform(self, user_id: int, *channels: str) -> None: ...


class KeywordOnly(rfetch.Job):
    def perform(self, user_id: int, *, dry_run: bool) -> None: ...


class KeywordWithDefault(rfetch.Job):
    def perform(self, user_id: int, *, dry_run: bool = False, **extra: Any) -> None: ...


class Static(rfetch.Job):
    @staticmethod
    def perform(user_id: int) -> None: ...


@rfetch.job
def send_receipt(order_id: int, copies: int = 1) -> None: ...


@pytest.mark.parametrize(
    ("push", "message"),
    [
        (lambda c: SendWelcome.set(client=c).perform_async(), "takes 1 to 2 arguments, got 0"),
        (
            lambda c: SendWelcome.set(client=c).perform_async(1, "a", "b"),
            "takes 1 to 2 arguments, got 3: [1, 'a', 'b']",
        ),
        (lambda c: SendWelcome.set(client=c).perform_in(60), "got 0"),
        (lambda c: SendWelcome.set(client=c).perform_at(0, 1, 2, 3), "got 3"),
        (lambda c: Notify.set(client=c).perform_async(), "takes at least 1 argument, got 0"),
        (lambda c: KeywordOnly.set(client=c).perform_async(1), "['dry_run'] without a default"),
        (lambda c: Static.set(client=c).perform_async(1, 2), "takes 1 argument, got 2"),
        (lambda c: send_receipt.set(client=c).perform_async(), "takes 1 to 2 arguments, got 0"),
        (lambda c: send_receipt.set(client=c).perform_async(1, 2, 3), "got 3"),
    ],
)
def test_a_push_that_does_not_fit_perform_is_refused(
    client: Client, push: Any, message: str
) -> None:
    with pytest.raises(ArgsMismatch, match="perform") as caught:
        push(client)
    assert message in str(caught.value)
    assert "nothing was pushed" in str(caught.value) or "without a default" in str(caught.value)
    assert isinstance(caught.value, TypeError)  # as a wrong call of perform itself would be


def test_the_message_names_the_job_and_its_signature(client: Client) -> None:
    with pytest.raises(ArgsMismatch) as caught:
        SendWelcome.set(client=client).perform_async()
    assert str(caught.value).startswith(
        f"{SendWelcome.job_name()}.perform(user_id, template='welcome') takes 1 to 2 arguments"
    )


def test_a_bulk_push_with_one_bad_list_is_refused_whole(client: Client) -> None:
    with pytest.raises(ArgsMismatch, match="got 3"):
        SendWelcome.set(client=client).perform_bulk([[1], [2, "x"], [3, "y", "z"]])


def test_arguments_that_fit_reach_the_client(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defaults, *args, keyword-only parameters with a default and **kwargs all accept the
    pushes they can take; those go on to the client."""
    pushed: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(
        client, "push", lambda name, args, *rest, **kw: pushed.append((name, list(args)))
    )
    monkeypatch.setattr(
        client,
        "push_bulk",
        lambda name, arg_lists, *rest, **kw: pushed.extend((name, a) for a in arg_lists),
    )
    SendWelcome.set(client=client).perform_async(1)
    SendWelcome.set(client=client).perform_async(1, "x")
    Notify.set(client=client).perform_async(1, "mail", "sms", "push")
    KeywordWithDefault.set(client=client).perform_async(1)
    Static.set(client=client).perform_async(1)
    send_receipt.set(client=client).perform_async(7, 2)
    SendWelcome.set(client=client).perform_bulk([[1], [2, "x"]])
    assert [args for _, args in pushed] == [[1], [1, "x"], [1, "mail", "sms", "push"], [1], [1],
                                            [7, 2], [1], [2, "x"]]


def test_a_coalescing_job_takes_its_batch_not_the_pushed_arguments(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Index(rfetch.Job):
        coalesce = True

        def ordering_key(self, doc_id: int, *rest: Any) -> str:
            return f"doc:{doc_id}"

        def perform(self, batch: list[list[Any]]) -> None: ...

    pushed: list[list[Any]] = []
    monkeypatch.setattr(client, "push", lambda name, args, *rest, **kw: pushed.append(list(args)))
    Index.set(client=client).perform_async(9, {"title": "x"})
    assert pushed == [[9, {"title": "x"}]]


def test_a_redefined_perform_is_read_again(client: Client) -> None:
    class Report(rfetch.Job):
        def perform(self, day: str) -> None: ...

    with pytest.raises(ArgsMismatch, match="got 0"):
        Report.set(client=client).perform_async()

    def perform(self: Report) -> None: ...

    Report.perform = perform  # type: ignore[method-assign]
    with pytest.raises(ArgsMismatch, match="takes 0 arguments, got 1"):
        Report.set(client=client).perform_async("monday")


def test_a_job_defined_in_main_is_pushed_with_a_warning(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script's own job class is named ``__main__.<Class>``, which no worker registers."""
    pushed: list[str] = []
    monkeypatch.setattr(client, "push", lambda name, *rest, **kw: pushed.append(name))

    def perform(self: rfetch.Job, n: int) -> None: ...

    Script = type("Script", (rfetch.Job,), {"perform": perform, "__module__": "__main__"})
    Named = type(
        "Named", (rfetch.Job,), {"perform": perform, "__module__": "__main__", "name": "Named"}
    )
    with pytest.warns(
        rfetch.UnrunnableJobWarning, match=r"'__main__\.Script'.*name = 'Script'"
    ) as single:
        Script.set(client=client).perform_async(1)
    assert pushed == ["__main__.Script"]  # still pushed: a warning, not an error
    monkeypatch.setattr(client, "push_bulk", lambda name, *rest, **kw: pushed.append(name))
    with pytest.warns(rfetch.UnrunnableJobWarning) as bulk:
        Script.set(client=client).perform_bulk([[1], [2], [3]])
    assert pushed == ["__main__.Script"] * 2
    assert len(bulk) == 1  # once per bulk push, not once per job
    # Both point at the application's push call.
    assert [w.filename for w in [*single, *bulk]] == [__file__, __file__]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Named.set(client=client).perform_async(1)
