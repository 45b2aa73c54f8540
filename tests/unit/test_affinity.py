"""CPU affinity: the CPU list format, the slot files that spread the worker
processes of a host over its CPUs, and the cases where ``auto`` leaves placement alone.
Pinning a real worker is tested in tests/integration/test_affinity_worker.py; moving the
threads of a process is tested here in a child process (never the test process itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.worker import affinity


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("3", {3}), ("0,2", {0, 2}), ("0-3,8-9", {0, 1, 2, 3, 8, 9}), (" 1 , 4-5 ", {1, 4, 5})],
)
def test_cpu_lists_parse_as_the_kernel_writes_them(text: str, cpus: set[int]) -> None:
    assert affinity.parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["", "x", "3-1", "-1", "1,", "0-", "auto,1"])
def test_a_bad_cpu_list_is_a_clear_error(text: str) -> None:
    with pytest.raises(ConfigError, match="cpu_affinity"):
        affinity.parse_cpu_list(text)


def test_format_is_the_inverse_of_parse() -> None:
    assert affinity.format_cpus({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert affinity.parse_cpu_list(affinity.format_cpus({0, 1, 2, 5, 7, 8})) == {0, 1, 2, 5, 7, 8}
    assert affinity.format_cpus(()) == ""


def test_config_checks_the_setting_and_reads_the_environment() -> None:
    assert Config().cpu_affinity == "adaptive"
    assert Config(cpu_affinity="auto").cpu_affinity == "auto"
    assert Config(cpu_affinity="none").cpu_affinity == "none"
    assert Config.from_env({"RFETCH_CPU_AFFINITY": "0-1"}).cpu_affinity == "0-1"
    with pytest.raises(ConfigError, match="'adaptive', 'auto', 'none' or a CPU list"):
        Config(cpu_affinity="fast")
    with pytest.raises(ConfigError, match="cpu_affinity"):
        Config.from_env({"RFETCH_CPU_AFFINITY": "2-1"})


def test_slots_are_tried_from_the_current_cpu_upwards() -> None:
    assert affinity.slot_order([0, 1, 2, 3], 2) == [2, 3, 0, 1]
    assert affinity.slot_order({3, 1, 0}, None) == [0, 1, 3]
    assert affinity.slot_order([0, 1], 7) == [0, 1]


def test_processes_spread_over_cpus_and_a_closed_slot_is_free_again(tmp_path: Path) -> None:
    """flock locks belong to an open file, so one process can stand in for several."""
    held = []
    for expected in [(1, 0), (0, 0), (1, 1), (0, 1), (1, 2)]:
        taken = affinity.take_slot([1, 0], tmp_path)
        assert taken is not None
        assert taken[:2] == expected
        held.append(taken[2])
    os.close(held.pop(1))  # the process on cpu0.0 ended (the kernel drops its lock)
    again = affinity.take_slot([1, 0], tmp_path)
    assert again is not None
    assert again[:2] == (0, 0)
    for fd in [*held, again[2]]:
        os.close(fd)


def test_an_unusable_lock_folder_leaves_placement_to_the_kernel(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    assert affinity.take_slot([0, 1], blocker) is None


def test_none_changes_nothing() -> None:
    before = os.sched_getaffinity(0)
    placement = affinity.apply("none")
    assert not placement.pinned
    assert placement.cpus == before
    assert os.sched_getaffinity(0) == before


def test_a_cpu_outside_the_allowed_set_is_refused() -> None:
    beyond = max(os.sched_getaffinity(0)) + 1000
    with pytest.raises(ConfigError, match=f"CPU {beyond} is not available to this process"):
        affinity.apply(str(beyond))


def test_auto_leaves_a_single_cpu_alone(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    placement = affinity.apply("auto", tmp_path)
    assert not placement.pinned
    assert "only one CPU" in placement.how
    assert list(tmp_path.iterdir()) == []


def test_auto_leaves_a_free_threaded_python_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    placement = affinity.apply("auto", tmp_path)
    assert not placement.pinned
    assert "GIL is disabled" in placement.how
    assert list(tmp_path.iterdir()) == []


def test_current_cpu_is_one_of_the_allowed() -> None:
    assert affinity.current_cpu() in os.sched_getaffinity(0)


def test_a_refused_pin_gives_the_threads_back_and_frees_the_slot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The kernel refusing one CPU (seccomp, a cpuset changed meanwhile) leaves the process
    as it was: every thread on every allowed CPU, and the slot free for another worker."""
    calls: list[set[int]] = []

    def setaffinity(tid: int, mask: set[int]) -> None:
        calls.append(set(mask))
        if len(mask) == 1:
            raise PermissionError("refused")

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "sched_setaffinity", setaffinity)
    placement = affinity.apply("auto", tmp_path)
    assert not placement.pinned
    assert "refused" in placement.how
    assert placement.lock_fd is None
    assert calls[-1] == {0, 1}, "every allowed CPU given back"
    taken = affinity.take_slot([0, 1], tmp_path)
    assert taken is not None and taken[1] == 0, "slot 0 is free again"
    os.close(taken[2])


MOVE_THREADS = """
import json, os, sys, threading
from rfetch.worker.affinity import pin_threads
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(3)]
for thread in threads:
    thread.start()
def placements():
    return [sorted(os.sched_getaffinity(int(tid))) for tid in os.listdir("/proc/self/task")]
pin_threads({int(sys.argv[1])})
pinned = placements()
pin_threads(set(json.loads(sys.argv[2])))
spread = placements()
stop.set()
print(json.dumps([pinned, spread]))
"""


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and two CPUs this process may use",
)
def test_pin_threads_moves_every_running_thread_there_and_back() -> None:
    """What adaptive affinity's moves rely on (a spread over every CPU, then pinned again):
    threads already running are moved, not only the calling one."""
    allowed = sorted(os.sched_getaffinity(0))
    out = subprocess.run(
        [sys.executable, "-c", MOVE_THREADS, str(allowed[-1]), json.dumps(allowed)],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    pinned, spread = json.loads(out)
    assert len(pinned) >= 4 and len(spread) == len(pinned)
    assert all(cpus == [allowed[-1]] for cpus in pinned), pinned
    assert all(cpus == allowed for cpus in spread), spread
