"""The choice between ``WAIT`` and ``WAITAOF`` (``Config.min_replicas``), and the worker's
acknowledgements with ``min_replicas_acks`` (never deferred, each followed by the wait)."""

from __future__ import annotations

import pytest

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.push.replicas import WaitCommand, choose_wait, server_version
from rfetch.worker.acks import DeferredAcks


@pytest.mark.parametrize(
    ("version", "aof", "expected"),
    [
        ("7.0.15", True, WaitCommand.WAIT),
        ("7.0.15", False, WaitCommand.WAIT),
        ("7.2.0", True, WaitCommand.WAITAOF),
        ("7.2.0", False, WaitCommand.WAIT),
        ("8.2.3", True, WaitCommand.WAITAOF),
        ("10.0.1", True, WaitCommand.WAITAOF),
        ("6.2.14", True, WaitCommand.WAIT),
        ("", True, WaitCommand.WAIT),
        ("unstable", True, WaitCommand.WAIT),
    ],
)
def test_waitaof_only_from_7_2_with_an_append_only_file(
    version: str, aof: bool, expected: WaitCommand
) -> None:
    assert choose_wait(version, aof) is expected


def test_server_version_reads_major_and_minor() -> None:
    assert server_version("7.2.4") == (7, 2)
    assert server_version("7") == (7, 0)
    assert server_version("x.y") == (0, 0)


def test_min_replicas_acks_needs_min_replicas() -> None:
    with pytest.raises(ConfigError, match="min_replicas_acks needs min_replicas"):
        Config(min_replicas_acks=True).validate()
    Config(min_replicas=1, min_replicas_acks=True).validate()


def test_min_replicas_acks_from_the_environment() -> None:
    config = Config.from_env({"RFETCH_MIN_REPLICAS": "1", "RFETCH_MIN_REPLICAS_ACKS": "yes"})
    assert config.min_replicas_acks is True
    with pytest.raises(ConfigError, match="RFETCH_MIN_REPLICAS_ACKS"):
        Config.from_env({"RFETCH_MIN_REPLICAS_ACKS": "maybe"})


class Unit:
    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name

    def acknowledge(self) -> bool:
        self.log.append(f"ack {self.name}")
        return True


def test_acks_with_a_replica_wait_are_sent_at_once_then_waited_for() -> None:
    log: list[str] = []
    acks = DeferredAcks(after=lambda: log.append("wait"))
    assert acks.deferring(True) == []  # the fetcher asks; nothing is deferred
    acks(Unit(log, "a"))  # type: ignore[arg-type]
    acks(Unit(log, "b"))  # type: ignore[arg-type]
    assert log == ["ack a", "wait", "ack b", "wait"]
    assert acks.take() == []
    assert not acks.due()


def test_acks_without_a_replica_wait_are_deferred() -> None:
    log: list[str] = []
    acks = DeferredAcks()
    acks.deferring(True)
    unit = Unit(log, "a")
    acks(unit)  # type: ignore[arg-type]
    assert log == []
    assert acks.take() == [unit]
