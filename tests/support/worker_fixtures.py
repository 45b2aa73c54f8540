"""The fixtures of the worker-process harness (a pytest plugin, registered in
``tests/conftest.py``):

- ``record``: the test's :class:`~tests.support.record.Record` (``<tmp_path>/record.txt``),
  the file the test jobs append their evidence to;
- ``worker_defaults``: what every worker of a module is started with (the ``rfetch worker``
  arguments put first, and the environment); a module overrides this fixture to change them;
- ``start_worker``: the one way the tests start ``rfetch worker`` processes; every process it
  started and that still runs at the end of the test is resumed (``SIGCONT``) and killed,
  each by its own PID.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest
import redis

from tests.support.record import Record
from tests.support.redis_server import RedisServer
from tests.support.workers import FAST_ENV, WorkerProcess


@dataclass(frozen=True)
class WorkerDefaults:
    """Arguments put before each call's own (after ``rfetch worker``), and environment
    variables under each call's own; ``RFETCH_TEST_RECORD`` names the test's record."""

    args: Sequence[str] = ("-r", "testjobs")
    env: Mapping[str, str] = field(default_factory=lambda: dict(FAST_ENV))


class StartWorker(Protocol):
    def __call__(
        self,
        *args: str,
        server: RedisServer | None = None,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        ready: bool = True,
        log_dir: Path | None = None,
    ) -> WorkerProcess:
        """Start ``rfetch worker <defaults.args> <args>``.

        Args:
            args: the call's own arguments.
            server: the Redis to work on (default: the session's ``redis_server``).
            url: a Redis URL to give instead of the server's (e.g. with a password); the
                heartbeat is still awaited on ``server``.
            env: variables on top of ``defaults.env`` and ``RFETCH_TEST_RECORD``.
            ready: wait (15 s at most) for the process's first heartbeat in ``processes``.
            log_dir: the folder of its output file (default: the test's ``tmp_path``).

        Raises:
            RuntimeError: ``ready`` and the process exited first.
            AssertionError: ``ready`` and no heartbeat within 15 s.
        """
        ...


@pytest.fixture
def record(tmp_path: Path) -> Record:
    """The test's record file (``<tmp_path>/record.txt``), empty at the start."""
    return Record(tmp_path / "record.txt")


@pytest.fixture
def worker_defaults() -> WorkerDefaults:
    """``-r testjobs`` with the short intervals of :data:`~tests.support.workers.FAST_ENV`."""
    return WorkerDefaults()


@pytest.fixture
def start_worker(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path, record: Record,
    worker_defaults: WorkerDefaults,
) -> Iterator[StartWorker]:
    """Start worker processes for this test (see :class:`StartWorker`); those still running
    at the end are resumed and killed."""
    started: list[WorkerProcess] = []

    def start(
        *args: str,
        server: RedisServer | None = None,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        ready: bool = True,
        log_dir: Path | None = None,
    ) -> WorkerProcess:
        target = server or redis_server
        proc = WorkerProcess(
            url or target.url,
            [*worker_defaults.args, *args],
            env={**worker_defaults.env, "RFETCH_TEST_RECORD": str(record.path), **(env or {})},
            log_dir=log_dir or tmp_path,
        )
        started.append(proc)
        if ready:
            client = r if server is None else server.client()
            try:
                proc.identity(client)
            finally:
                if server is not None:
                    client.close()
        return proc

    yield start
    for proc in started:
        if proc.proc.poll() is None:
            proc.signal(signal.SIGCONT)
            proc.kill()
