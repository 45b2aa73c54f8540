"""Whether a process of this host still exists (start-up recovery), on real processes."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rfetch.worker.host import ProcessStamp, has_ended, is_gone, own_stamp, start_ticks
from tests.support.wait import wait_for

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


def test_a_zombie_is_gone() -> None:
    """Killed but not reaped by its parent (here this test, which does not wait for it):
    ``kill(pid, 0)`` still succeeds and the start time still matches, but it has ended."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        stamp = stamp_of(child.pid)
        assert not has_ended(child.pid)
        os.kill(child.pid, signal.SIGKILL)  # nobody waits for it yet
        wait_for(lambda: _state(child.pid) == "Z", 30, "the killed child to become a zombie")
        assert has_ended(child.pid)
        os.kill(child.pid, 0)  # the zombie still answers signal 0
        assert start_ticks(child.pid) == stamp.start_ticks
        assert is_gone(stamp, mine())
    finally:
        child.kill()
        child.wait()
    assert not has_ended(child.pid)  # reaped: no process at all


def test_a_stopped_process_is_not_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        os.kill(child.pid, signal.SIGSTOP)
        wait_for(lambda: _state(child.pid) == "T", 30, "the child to stop")
        assert not has_ended(child.pid)
        assert not is_gone(stamp_of(child.pid), mine())
    finally:
        child.kill()
        child.wait()


def _state(pid: int) -> str:
    """The state letter of ``/proc/<pid>/stat`` (R, S, T, Z...)."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    return text[text.rfind(")") + 2]


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
