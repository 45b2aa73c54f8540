"""The evidence file the test jobs write (``tests/jobs``): the file named by
``RFETCH_TEST_RECORD``, one ``<event> <jid> <pid> <time> [extra]`` line per event, appended
with ``O_APPEND`` by any number of processes. Read afresh at every call, outside Redis: the
one record of what ran where, and when."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


class Record:
    """The ``RFETCH_TEST_RECORD`` file at ``path`` (it need not exist yet: no line then)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[list[str]]:
        """Every non-empty line, split on whitespace."""
        if not self.path.exists():
            return []
        return [line.split() for line in self.path.read_text().splitlines() if line.strip()]

    def events(self) -> list[tuple[str, str, int]]:
        """``(event, jid, pid)`` of every line, in file order."""
        return [(fields[0], fields[1], int(fields[2])) for fields in self.lines()]

    def rows(self, event: str) -> list[list[str]]:
        """``[jid, pid, time, extra...]`` of every line of ``event``."""
        return [fields[1:] for fields in self.lines() if fields[0] == event]

    def jids(self, event: str) -> list[str]:
        """The jid of every line of ``event``, in file order (repeats kept)."""
        return [row[0] for row in self.rows(event)]

    def pids(self, event: str, jid: str) -> list[int]:
        """PIDs of the processes that recorded ``event`` for ``jid``, in order."""
        return [int(row[1]) for row in self.rows(event) if row[0] == jid]

    def count(self, event: str) -> Counter[str]:
        """How many times each jid has ``event``."""
        return Counter(self.jids(event))

    def has(self, event: str, jid: str, pid: int | None = None) -> bool:
        """Whether ``jid`` recorded ``event`` (in process ``pid``, when given)."""
        return any(e == event and j == jid and pid in (None, p) for e, j, p in self.events())

    def done_order(self) -> list[str]:
        """The jids of the ``done`` lines, in file order."""
        return self.jids("done")

    def spans(self) -> list[tuple[float, float]]:
        """``(start, end)`` epoch seconds of every job that recorded both."""
        starts: dict[str, float] = {}
        spans = []
        for fields in self.lines():
            event, jid, stamp = fields[0], fields[1], float(fields[3])
            if event == "start":
                starts[jid] = stamp
            elif event == "done" and jid in starts:
                spans.append((starts[jid], stamp))
        return spans
