"""The wait for the replicas after an acknowledgement never raises: the job has run and is
acknowledged whatever the wait meets (a Redis error, or a bug)."""

from __future__ import annotations

from typing import Any

import pytest

from rfetch.config import Config
from rfetch.worker.ack_replicas import AckReplicas


class Broken:
    """A ReplicaWait whose mark fails with ``error``."""

    replicas = 1
    timeout_ms = 100
    generation = 0

    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.redis = self

    def publish(self, *args: Any) -> None:
        raise self.error


@pytest.mark.parametrize("error", [ConnectionError("down"), RuntimeError("bug")])
def test_a_failed_wait_is_counted_not_raised(error: BaseException) -> None:
    acks = AckReplicas(Config(redis_url="redis://127.0.0.1:1/0", min_replicas=1))
    acks.wait = Broken(error)  # type: ignore[assignment]
    assert acks.after_ack() is False
    assert acks.after_ack() is False
    assert acks.late == 2
