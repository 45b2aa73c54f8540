"""Helpers for the swarm, time-limit and cancellation tests: the evidence file written by
``tests/jobs`` (``<event> <jid> <pid> <time> [extra]``) and the children of a swarm."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import psutil
import redis

from rfetch.payload import loads


class Records:
    """The evidence file of ``RFETCH_TEST_RECORD``, read afresh at each call."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, event: str) -> list[list[str]]:
        """``[jid, pid, time, extra...]`` of every line of ``event``."""
        if not self.path.exists():
            return []
        lines = [line.split() for line in self.path.read_text().splitlines() if line]
        return [row[1:] for row in lines if row[0] == event]

    def count(self, event: str) -> Counter[str]:
        """How many times each jid has ``event``."""
        return Counter(row[0] for row in self.rows(event))

    def pids(self, event: str, jid: str) -> list[int]:
        return [int(row[1]) for row in self.rows(event) if row[0] == jid]


def children(parent: int) -> list[psutil.Process]:
    """The live children of ``parent`` (a swarm's workers). A child that exits while it is
    looked at is left out, not taken for the end of them all."""
    try:
        found = psutil.Process(parent).children()
    except psutil.NoSuchProcess:
        return []
    live = []
    for child in found:
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                live.append(child)
        except psutil.NoSuchProcess:
            continue
    return live


def title(proc: psutil.Process) -> str:
    """A process's title (``setproctitle`` rewrites its command line)."""
    try:
        return " ".join(part for part in proc.cmdline() if part)
    except psutil.Error:
        return ""


def set_entries(client: redis.Redis, key: str) -> dict[str, dict[str, object]]:
    """jid -> payload of every job in a sorted set (``retry``, ``dead``, ``schedule``)."""
    out: dict[str, dict[str, object]] = {}
    for raw in client.zrange(key, 0, -1):
        payload = loads(raw)
        out[payload["jid"]] = payload
    return out
