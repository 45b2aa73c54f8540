"""A user's module, type-checked by tests/unit/test_typed_install.py with mypy --strict and
pyright from a directory outside the repository, so rfetch is found only through the
installed package (an editable install's .pth entry). Every line marked ``# wrong`` must be
flagged by both checkers, and no other line."""

from __future__ import annotations

import rfetch


class SendWelcome(rfetch.Job):
    queue = "mail"

    def perform(self, user_id: int, template: str = "welcome") -> None: ...


@rfetch.job(queue="mail")
def notify(user_id: int) -> None: ...


def right() -> None:
    SendWelcome.perform_async(42, "hi")
    SendWelcome.set(queue="critical", retry=3, tags=["a"], client=None).perform_async(42)
    SendWelcome.set(retry=False, unique_for=60, coalesce="last").perform_in(30, 42)
    SendWelcome.set(after_outcome="complete", on_dependency_death="cancel").set(key="k")
    SendWelcome.perform_bulk([[1, "a"], [2]])
    SendWelcome.perform_bulk([SendWelcome.s(1, "a"), SendWelcome.s(2)])
    notify.set(expires_in=5.5).perform_async(1)
    notify.perform_bulk([notify.s(1)])
    SendWelcome.s(1).set(queue="low")


def wrong() -> None:
    SendWelcome.set(queu="q").perform_async(42)  # wrong: unknown option
    SendWelcome.set(retry="yes").perform_async(42)  # wrong: option of the wrong type
    notify.set(timeout="10").perform_async(1)  # wrong: option of the wrong type
    SendWelcome.set(queue="q").set(coalesce="first")  # wrong: option of the wrong value
    SendWelcome.s(1).set(queue=5)  # wrong: option of the wrong type
    SendWelcome.perform_async("42")  # wrong: argument of the wrong type
    SendWelcome.perform_async(42, "hi", "extra")  # wrong: too many arguments
    SendWelcome.perform_bulk([SendWelcome.s("1", "x")])  # wrong: bulk argument type
    SendWelcome.perform_bulk([SendWelcome.s()])  # wrong: bulk argument missing
    notify.perform_bulk([notify.s(1, 2)])  # wrong: bulk arguments too many
