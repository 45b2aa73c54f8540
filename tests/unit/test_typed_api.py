"""The push methods are typed from ``perform``'s signature: mypy flags a wrong call."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mypy import api

SOURCE = textwrap.dedent(
    """
    import rfetch

    class SendWelcome(rfetch.Job):
        def perform(self, user_id: int, template: str = "welcome") -> None: ...

    class Fetch(rfetch.Job):
        async def perform(self, url: str) -> None: ...

    @rfetch.job(queue="mail")
    def notify(user_id: int) -> None: ...

    SendWelcome.perform_async(42, "hi")
    SendWelcome.perform_async(user_id=42)
    SendWelcome.perform_in(30, 42)
    SendWelcome.set(queue="critical").perform_async(42)
    Fetch.perform_async("https://example.com/")
    notify.perform_async(1)
    notify.set(retry=3).perform_at(0.0, 1)

    SendWelcome.perform_async("42")  # wrong: 1
    SendWelcome.perform_in(30, 42, 7)  # wrong: 2
    SendWelcome.set(queue="critical").perform_async()  # wrong: 3
    SendWelcome.perform_at(0.0, 42, "hi", "extra")  # wrong: 4
    Fetch.perform_async(3)  # wrong: 5
    notify.perform_async("1")  # wrong: 6
    notify.set(retry=3).perform_in(5, user="x")  # wrong: 7
    """
)


def test_mypy_flags_wrong_arguments_at_the_call_site(tmp_path: Path) -> None:
    path = tmp_path / "calls.py"
    path.write_text(SOURCE)
    stdout, stderr, status = api.run(
        [str(path), "--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache")]
    )
    assert status == 1, stdout + stderr
    lines = SOURCE.splitlines()
    flagged = {int(m.group(1)) for m in re.finditer(r"calls\.py:(\d+): error", stdout)}
    wrong = {n for n, text in enumerate(lines, 1) if "# wrong" in text}
    assert flagged == wrong, stdout
    expected = 'Argument 1 to "perform_async" of "Job" has incompatible type "str"; expected "int"'
    assert expected in stdout
