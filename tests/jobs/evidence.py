"""The evidence helpers the test jobs share (``tests/jobs``; workers import it from there):
one line appended with ``O_APPEND`` in one ``write(2)`` (so lines of many processes never
mix, and a line survives a SIGKILL a moment later), a marker file that says "first time"
once across every process, and a death handler that records each death."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import rfetch


def append_line(path: str, line: str) -> None:
    """Append ``line`` (with its newline) to the file at ``path``, created if missing."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def first_time(marker: str) -> bool:
    """True the first time any process asks for the marker file at ``marker`` (it is
    created exclusively), False ever after."""
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def record_deaths(config: rfetch.Config, record: Callable[[str, str, str], None]) -> None:
    """Add a death handler to ``config`` that records ``died <jid> <error class>`` through
    ``record(event, jid, extra)``."""

    def died(job: dict[str, Any], exc: BaseException) -> None:
        record("died", str(job.get("jid")), f"{type(exc).__module__}.{type(exc).__name__}")

    config.death_handlers.append(died)
