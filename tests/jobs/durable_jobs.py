"""Jobs for the durable-job tests (iterable jobs, durable steps); workers load them with
``-r durable_jobs``. Every side effect is counted in Redis (``REDIS_URL``) so that a test
sees exactly how often each item or step ran, whatever process ran it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import redis

import rfetch
from rfetch.durable.enumerators import range_enumerator


def _redis() -> redis.Redis:
    return redis.Redis.from_url(os.environ["REDIS_URL"])


class Walk(rfetch.IterableJob):
    """Items ``0..n-1``, each sleeping ``pause`` s; item ``i`` counts in hash ``walk:<jid>``
    and the saved cursor is appended to ``cursors:<jid>`` at every resume."""

    checkpoint_interval = 0.5
    retry = 3

    def __init__(self) -> None:
        self.r = _redis()

    def build_enumerator(self, n: int, pause: float, *,
                         cursor: int | None) -> Iterator[tuple[int, int]]:
        self.r.rpush(f"cursors:{self.jid}", "start" if cursor is None else str(cursor))
        return range_enumerator(0, n, cursor=cursor)

    def each_iteration(self, item: int, n: int, pause: float) -> None:
        self.r.hincrby(f"walk:{self.jid}", str(item), 1)
        self.r.set(f"walk-pid:{self.jid}:{item}", os.getpid())
        if pause:
            time.sleep(pause)

    def on_complete(self) -> None:
        self.r.incr(f"complete:{self.jid}")

    def total(self, n: int, pause: float) -> int:
        return n


class ShortWalk(Walk):
    """A walk that goes back to its queue every second (``max_runtime``)."""

    max_runtime = 1.0


class FailOnce(Walk):
    """Fails the first time it reaches item ``n // 2``; retried at once."""

    def each_iteration(self, item: int, n: int, pause: float) -> None:
        super().each_iteration(item, n, pause)
        if item == n // 2 and self.r.set(f"failed:{self.jid}", 1, nx=True):
            raise RuntimeError(f"item {item} fails once")

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        return 0


class FiveSteps(rfetch.Job):
    """Five durable steps; step ``i`` counts in ``step:<jid>:<i>``; once it is recorded
    the job writes ``after:<jid>`` = ``i`` and sleeps ``pause`` s (a window for a kill -9
    after it). The results' sum goes to ``sum:<jid>``."""

    retry = 5

    def perform(self, pause: float) -> None:
        r = _redis()
        results = []
        for i in range(1, 6):
            results.append(self.step(f"s{i}", self._side_effect, r, i))
            r.set(f"after:{self.jid}", i)
            time.sleep(pause)
        r.set(f"sum:{self.jid}", sum(results))

    def _side_effect(self, r: redis.Redis, i: int) -> int:
        r.incr(f"step:{self.jid}:{i}")
        return i * 10


class StepsFailOnce(FiveSteps):
    """Five steps; the first execution fails right after step 3 is recorded."""

    def perform(self, pause: float) -> None:
        r = _redis()
        results = []
        for i in range(1, 6):
            results.append(self.step(f"s{i}", self._side_effect, r, i))
            if i == 3 and r.set(f"failed:{self.jid}", 1, nx=True):
                raise RuntimeError("fails once after step 3")
        r.set(f"sum:{self.jid}", sum(results))

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        return 0


class ItemSteps(rfetch.IterableJob):
    """Each item runs two steps; item 3's second step fails once. Step results per item."""

    retry = 3

    def build_enumerator(self, *, cursor: int | None) -> Iterator[tuple[int, int]]:
        return range_enumerator(0, 6, cursor=cursor)

    def each_iteration(self, item: int) -> None:
        r = _redis()
        self.step("a", r.hincrby, f"a:{self.jid}", str(item), 1)
        if item == 3 and r.set(f"failed:{self.jid}", 1, nx=True):
            raise RuntimeError("item 3 fails once")
        self.step("b", r.hincrby, f"b:{self.jid}", str(item), 1)

    def on_complete(self) -> None:
        _redis().incr(f"complete:{self.jid}")

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> float:
        return 0


class FenceWalk(Walk):
    """A walk that also logs ``<pid> <item>`` to ``runs:<jid>`` at the start of each item."""

    def each_iteration(self, item: int, n: int, pause: float) -> None:
        self.r.rpush(f"runs:{self.jid}", f"{os.getpid()} {item}")
        super().each_iteration(item, n, pause)


_BALLAST: list[bytes] = []
"""Memory a :class:`ChaosWalk` item takes on purpose, to be recycled past --max-memory."""


class ChaosWalk(rfetch.IterableJob):
    """The chaos suite's walk: item ``i`` counts in hash ``chaos:count`` (one pipeline per
    item, which also notes ``chaos:owner`` = ``<pid> <item>`` and ``chaos:last`` = ``i``);
    each execution appends ``<resume cursor> <last item started before it> <cause>`` to
    ``chaos:resumes`` (``chaos:cause``: the harness's last interruption). An item takes
    at least 1 ms. Flags set by the harness:
    ``chaos:slow`` makes the next item take 3 s (a TERM then goes past ``-t``),
    ``chaos:bloat`` makes it take 300 MB (past ``--max-memory``)."""

    checkpoint_interval = 1.0
    retry = 25

    def __init__(self) -> None:
        self.r = _redis()

    def build_enumerator(self, n: int, *, cursor: int | None) -> Iterator[tuple[int, int]]:
        last, cause = self.r.mget("chaos:last", "chaos:cause")
        self.r.rpush("chaos:resumes", f"{cursor} {last.decode() if last else None} "
                                      f"{cause.decode() if cause else 'start'}")
        return range_enumerator(0, n, cursor=cursor)

    def each_iteration(self, item: int, n: int) -> None:
        pipe = self.r.pipeline(transaction=False)
        pipe.hincrby("chaos:count", str(item), 1)
        pipe.set("chaos:owner", f"{os.getpid()} {item}")
        pipe.set("chaos:last", item)
        pipe.getdel("chaos:slow")
        pipe.getdel("chaos:bloat")
        *_, slow, bloat = pipe.execute()
        time.sleep(0.001)
        if slow:
            time.sleep(3.0)
        if bloat:
            _BALLAST.append(b"x" * (300 * 1024 * 1024))

    def on_complete(self) -> None:
        self.r.incr("chaos:complete")
