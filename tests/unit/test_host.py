"""Whether a process of this host still exists (start-up recovery), on real processes."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from rfetch.worker.host import ProcessStamp, is_gone, own_stamp, start_ticks

pytestmark = pytest.mark.skipif(own_stamp() is None, reason="needs Linux /proc")


def mine() -> ProcessStamp:
    stamp = own_stamp()
    assert stamp is not None
    return stamp


def stamp_of(pid: int) -> ProcessStamp:
    ticks = start_ticks(pid)
    assert ticks is not None
    return dataclasses.replace(mine(), pid=pid, start_ticks=ticks)


def test_a_running_process_is_not_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not is_gone(stamp_of(child.pid), mine())
        assert not is_gone(mine(), mine())
    finally:
        child.kill()
        child.wait()


def test_an_exited_process_is_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stamp = stamp_of(child.pid)
    child.wait()
    assert is_gone(stamp, mine())


def test_a_reused_pid_is_gone() -> None:
    """The pid is alive but started at another tick: another process took the pid."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        earlier = dataclasses.replace(stamp_of(child.pid), start_ticks=1)
        assert is_gone(earlier, mine())
        assert is_gone(dataclasses.replace(mine(), start_ticks=1), mine())
    finally:
        child.kill()
        child.wait()


def test_processes_of_another_boot_or_namespace_are_never_judged() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stamp = stamp_of(child.pid)
    child.wait()
    assert not is_gone(dataclasses.replace(stamp, boot_id="other"), mine())
    assert not is_gone(dataclasses.replace(stamp, pid_namespace="pid:[1]"), mine())


def test_the_stamp_round_trips_through_the_heartbeat_info() -> None:
    stamp = mine()
    assert ProcessStamp.from_info({"proc": stamp.to_info()}) == stamp
    assert ProcessStamp.from_info({}) is None
    assert ProcessStamp.from_info({"proc": {"pid": "x"}}) is None
    assert ProcessStamp.from_info({"proc": "text"}) is None
