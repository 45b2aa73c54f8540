"""An rfetch worker's parts wired in the test process (:class:`Worker`, driven one job at a
time or as a running pool), and jobs that record their runs, for the step-by-step tests of
retries, error reporting, ordering keys, tenants and their API and web views.

``clear_runs`` is a fixture (registered in ``tests/conftest.py``); a module that uses
``RAN``/``FAIL`` marks itself with ``pytest.mark.usefixtures("clear_runs")``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
import redis

import rfetch
from rfetch.client import Client
from rfetch.config import Config
from rfetch.job import RetryDecision
from rfetch.store.connection import connect
from rfetch.worker.launcher import Launcher
from rfetch.worker.manager import Manager
from rfetch.worker.recovery import OrphanRecovery
from rfetch.worker.registry import Registry
from rfetch.worker.unit import UnitOfWork

RAN: list[tuple[str, Any]] = []
"""(class name, args) of every run of the jobs below."""


class Step(rfetch.Job):
    """Records its run; fails while its first argument is in ``FAIL``."""

    queue = "q"

    def perform(self, *args: Any) -> None:
        RAN.append(("Step", list(args)))
        if args and args[0] in FAIL:
            raise RuntimeError(f"failing {args[0]}")

    def retry_in(self, count: int, exc: BaseException, job: dict[str, Any]) -> RetryDecision:
        return 1000.0


class Skipper(Step):
    """As Step, with the skip policy."""

    key_on_failure = "skip"


class ByPost(rfetch.Job):
    """Class-level ordering key from the first argument."""

    queue = "q"

    def ordering_key(self, post_id: int, *rest: Any) -> str | None:
        return f"post:{post_id}"

    def perform(self, *args: Any) -> None:
        RAN.append(("ByPost", list(args)))


FAIL: set[Any] = set()
JOBS: list[type[rfetch.Job]] = [Step, Skipper, ByPost]


class Worker:
    """One worker's parts, wired by ``rfetch.worker.launcher.Launcher`` (never run: its
    parts are driven one job at a time, or as a pool with :meth:`pool`).

    Args:
        config: the settings.
        classes: the job classes it may run (default: the recording jobs above).
    """

    def __init__(self, config: Config, classes: Sequence[type[rfetch.Job]] = JOBS) -> None:
        self.config = config
        self.redis = connect(config)
        self.launcher = Launcher(config, Registry(classes), redis=self.redis)
        self.identity = self.launcher.identity
        self.keys = self.launcher.keys
        self.commands = self.launcher.commands
        self.fetch = self.launcher.fetch
        self.stats = self.launcher.stats
        self.job_retry = self.launcher.job_retry
        self.processor = self.launcher.processor
        self.poller = self.launcher.poller
        self.client = Client(config, self.redis)

    def other_process(self, identity: str = "someone-else:1:000000000000") -> OrphanRecovery:
        """The orphan recovery of another process (``identity``) on the same Redis."""
        return Launcher(self.config, Registry([]), redis=self.redis, identity=identity).recovery

    def take(self) -> UnitOfWork:
        units = self.fetch.retrieve_work(1)
        assert len(units) == 1, "expected one job in the queue"
        return units[0]

    def work_one(self) -> UnitOfWork:
        unit = self.take()
        self.processor.process(unit)
        return unit

    def drain(self) -> int:
        done = 0
        while units := self.fetch.retrieve_work(1):
            self.processor.process(units[0])
            done += 1
        return done

    def private_lengths(self) -> int:
        """Jobs in this worker's private lists."""
        return sum(
            int(self.redis.llen(self.fetch.private_key(q.name))) for q in self.config.queues
        )

    @contextmanager
    def pool(self) -> Iterator[Manager]:
        """The pool and the poller in threads, as a worker process runs them."""
        manager = self.launcher.manager
        stop = threading.Event()
        poller = threading.Thread(target=self.poller.run, args=(stop,), daemon=True)
        manager.start()
        poller.start()
        try:
            yield manager
        finally:
            stop.set()
            manager.finish()
            poller.join(5)


@pytest.fixture
def clear_runs() -> Iterator[None]:
    """Empty ``RAN`` and ``FAIL`` around a test."""
    RAN.clear()
    FAIL.clear()
    yield
    RAN.clear()
    FAIL.clear()


@contextmanager
def running(config: Config) -> Iterator[Worker]:
    """A :class:`Worker` for ``config``, its connection closed afterwards."""
    w = Worker(config)
    try:
        yield w
    finally:
        w.redis.close()


def push(w: Worker, key: str | None, *args: Any, cls: type[rfetch.Job] = Step, **opts: Any) -> str:
    options = {} if key is None else {"key": key}
    jid = cls.set(client=w.client, **options, **opts).perform_async(*args)
    assert jid is not None
    return jid


def queue_jids(r: redis.Redis, queue: str = "q", ns: str = "") -> list[str]:
    """Jids in the public queue, next to run first."""
    return [json.loads(raw)["jid"] for raw in reversed(r.lrange(f"{ns}queue:{queue}", 0, -1))]


def waiting(r: redis.Redis, key: str, queue: str = "q", ns: str = "") -> list[str]:
    """Jids waiting in a key's list, next to go out first."""
    raws = r.lrange(f"{ns}rfetch:key:{queue}:{key}", 0, -1)
    return [json.loads(raw)["jid"] for raw in reversed(raws)]


def holder(r: redis.Redis, key: str, queue: str = "q", ns: str = "") -> str | None:
    value = r.hget(f"{ns}rfetch:key-holders:{queue}", key)
    return value.decode() if value is not None else None


def make_due(r: redis.Redis, key: str) -> None:
    """Move every entry of a retry/schedule set to the past instead of waiting for it."""
    members = r.zrange(key, 0, -1)
    assert members
    r.zadd(key, {m: 1.0 for m in members}, xx=True)
