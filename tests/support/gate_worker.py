"""The in-process harness: an rfetch worker's parts wired in the test process
(:class:`Worker`, driven one job at a time or as a running pool; :class:`LaunchedWorker`, a
real ``Launcher`` whose manager runs in threads), and jobs that record their runs, for the
step-by-step tests of retries, error reporting, ordering keys, tenants and their API and web
views.

Fixtures (this module is a pytest plugin, registered in ``tests/conftest.py``; a module may
override ``cfg`` and ``worker`` with its own):

- ``clear_runs`` empties ``RAN``/``FAIL``; a module that uses them marks itself with
  ``pytest.mark.usefixtures("clear_runs")``.
- ``cfg``: settings on the session redis-server (flushed), queue ``q``, 0.2 s blocking fetch.
- ``worker``: a :class:`Worker` on ``cfg`` running the recording jobs.
- ``launch``: builds :class:`LaunchedWorker` objects, all stopped after the test.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import pytest
import redis

import rfetch
from rfetch.config import Config, QueueSpec
from rfetch.jobs.job import RetryDecision
from rfetch.push.client import Client
from rfetch.store.connection import connect
from rfetch.worker.fetch import ReliableFetch
from rfetch.worker.launcher import Launcher
from rfetch.worker.manager import Manager
from rfetch.worker.orphan_recovery import OrphanRecovery
from rfetch.worker.registry import Registry
from rfetch.worker.unit import UnitOfWork
from tests.support.redis_server import RedisServer

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
    parts are driven one job at a time, or as a pool with :meth:`pool`, once).

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
        return private_lengths(self.fetch)

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


def private_lengths(fetch: ReliableFetch) -> int:
    """Jobs in the private lists of ``fetch``'s process, over its configured queues."""
    return sum(int(fetch.redis.llen(fetch.private_key(q.name))) for q in fetch.config.queues)


class LaunchedWorker:
    """A real ``Launcher`` built in this process, for what the launcher wires (error
    reporting, the manager's sweeps): its manager's threads run after :meth:`start`; no
    signal handlers, heartbeat or orphan recovery.

    Args:
        config: the settings.
        classes: the job classes it may run.
    """

    def __init__(self, config: Config, classes: Sequence[type[rfetch.Job]] = JOBS) -> None:
        self.launcher = Launcher(config, Registry(classes))
        self.client = Client(config, self.launcher.redis)

    def start(self) -> None:
        """Start the manager's processor threads and fetcher."""
        self.launcher.manager.start()

    def stop(self) -> None:
        """End the pool (pushing back what it holds) and close the connection."""
        self.launcher.manager.finish()
        self.launcher.redis.close()

    def private_lengths(self) -> int:
        """Jobs in this worker's private lists."""
        return private_lengths(self.launcher.fetch)


Launch = Callable[..., LaunchedWorker]
"""``launch(config, classes=JOBS)``: the ``launch`` fixture's builder."""


@pytest.fixture
def launch() -> Iterator[Launch]:
    """Build :class:`LaunchedWorker` objects; every one is stopped after the test."""
    built: list[LaunchedWorker] = []

    def build(config: Config, classes: Sequence[type[rfetch.Job]] = JOBS) -> LaunchedWorker:
        built.append(LaunchedWorker(config, classes))
        return built[-1]

    yield build
    for launched in built:
        launched.stop()


@contextmanager
def running(config: Config, classes: Sequence[type[rfetch.Job]] = JOBS) -> Iterator[Worker]:
    """A :class:`Worker` for ``config``, its connection closed afterwards."""
    w = Worker(config, classes)
    try:
        yield w
    finally:
        w.redis.close()


@pytest.fixture
def cfg(redis_server: RedisServer, r: redis.Redis) -> Config:
    """Settings on the session server (flushed by ``r``): queue ``q``, 0.2 s blocking fetch."""
    return Config(redis_url=redis_server.url, queues=[QueueSpec("q")], block_timeout=0.2)


@pytest.fixture
def worker(cfg: Config) -> Iterator[Worker]:
    """A :class:`Worker` on ``cfg`` with the recording jobs."""
    with running(cfg) as w:
        yield w


T = TypeVar("T")


def broken_once(real: Callable[..., T], error: BaseException) -> Callable[..., T]:
    """``real``, except that its first call raises ``error``: a bug injected into one of the
    worker's parts (put in place with ``monkeypatch.setattr``)."""
    calls: list[int] = []

    def call(*args: Any, **kwargs: Any) -> T:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return real(*args, **kwargs)

    return call


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
