"""Helpers for the swarm, time-limit and cancellation tests: the evidence file written by
``tests/jobs`` (``<event> <jid> <pid> <time> [extra]``) and the children of a swarm."""

from __future__ import annotations

import psutil
import redis

from rfetch.jobs.payload import loads
from tests.support.record import Record

Records = Record
"""The evidence file of ``RFETCH_TEST_RECORD`` (the harness's one :class:`Record`)."""


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
