"""``rfetch worker --cpu-affinity`` on real processes: where every thread of the
process may run, read from /proc/<pid>/task/*/status, and the slot a kill -9 frees."""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

import pytest
import redis

import rfetch
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import WorkerProcess

ALLOWED = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
pytestmark = pytest.mark.skipif(
    len(ALLOWED) < 2, reason="needs Linux and at least two CPUs this process may use"
)


def thread_cpus(pid: int) -> list[str]:
    """``Cpus_allowed_list`` of every thread of ``pid``."""
    lists = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        status = (task / "status").read_text()
        match = re.search(r"^Cpus_allowed_list:\s*(\S+)$", status, re.M)
        assert match is not None
        lists.append(match[1])
    return lists


def start(redis_server: RedisServer, tmp_path: Path, *args: str) -> WorkerProcess:
    # TMPDIR keeps this test's slot files apart from any other worker on the machine.
    return WorkerProcess(
        redis_server.url, ["-r", "testjobs", "-c", "4", *args], env={"TMPDIR": str(tmp_path)},
        log_dir=tmp_path,
    )


def placed_on(worker: WorkerProcess, r: redis.Redis) -> str:
    worker.identity(r)  # heartbeat written: the affinity was applied before
    match = re.search(r"cpu affinity: (\S+) \((.*)\)", worker.log())
    assert match is not None, worker.log()
    return match[1]


def test_auto_puts_every_thread_on_one_cpu_and_spreads_processes(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    first = start(redis_server, tmp_path, "--cpu-affinity", "auto")
    second = start(redis_server, tmp_path, "--cpu-affinity", "auto")
    try:
        cpu_a, cpu_b = placed_on(first, r), placed_on(second, r)
        assert cpu_a != cpu_b, "slot 0 of every CPU is taken before any slot 1"
        for worker, cpu in ((first, cpu_a), (second, cpu_b)):
            # The first heartbeat comes before the pool starts: wait for the processors,
            # fetcher, heartbeat, poller, ... (threads started after the pin inherit it).
            wait_for(lambda w=worker: len(thread_cpus(w.pid)) >= 4 + 3, 60, "the threads")
            lists = thread_cpus(worker.pid)
            assert set(lists) == {cpu}
            assert int(cpu) in ALLOWED
    finally:
        first.kill()
        second.kill()


def test_the_default_starts_pinned_with_every_thread_on_one_cpu(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """Adaptive affinity (the default) starts as ``auto`` does: the process takes a slot and
    every thread runs on that one CPU. (Whether and when it then spreads over every CPU
    needs an idle CPU, so it is measured by ``python -m benchmarks.affinity_spread``, not
    asserted here; the decision is unit-tested with fake clocks in
    tests/unit/test_adaptive_affinity.py.)"""
    worker = start(redis_server, tmp_path, "-v")
    try:
        cpu = placed_on(worker, r)
        assert re.search(r"cpu affinity: \d+ \(adaptive, slot cpu\d+\.0\)", worker.log())
        assert int(cpu) in ALLOWED
        wait_for(lambda: len(thread_cpus(worker.pid)) >= 4 + 3, 60, "the threads")
        assert set(thread_cpus(worker.pid)) == {cpu}
        assert "adaptive affinity:" not in worker.log(), "an idle worker is never moved"
    finally:
        worker.kill()


def test_the_default_goes_back_to_its_cpu_after_a_probe_of_serial_work(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    """Busy with jobs that use little CPU (sleeps): probed, then pinned again.

    The jobs sleep 0.2 s on 4 threads: the worker is saturated (every thread busy) but
    needs a few hundredths of a CPU, far below the 0.25 CPU more a spread must gain
    (``Tuning.min_gain``), so no load on the machine can make spreading win."""
    worker = start(redis_server, tmp_path, "-v")
    try:
        cpu = placed_on(worker, r)
        client = rfetch.Client(rfetch.Config(redis_url=redis_server.url))
        client.push_bulk("testjobs.Sleep", [[0.2] for _ in range(1500)])
        wait_for(lambda: "adaptive affinity: stays on CPUs" in worker.log(), 120,
                 lambda: f"a probe: {worker.log()}", step=0.2)
        assert re.search(r"probing CPUs \S+ \(\d\.\d\d CPUs used on", worker.log())
        # Pinned again: between two probes (each one window in several), every thread is
        # back on the slot's CPU.
        wait_for(lambda: set(thread_cpus(worker.pid)) == {cpu}, 60,
                 lambda: f"every thread back on CPU {cpu}: {thread_cpus(worker.pid)}")
        assert "spread over" not in worker.log()
    finally:
        worker.kill()


def test_a_killed_worker_frees_its_slot(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    worker = start(redis_server, tmp_path, "--cpu-affinity", "auto")
    cpu = placed_on(worker, r)
    slot = next(tmp_path.glob(f"rfetch-cpu-*/cpu{cpu}.0"))
    with open(slot, "rb") as probe:
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        worker.kill()
        wait_for(lambda: _lockable(probe.fileno()), 30, "the kernel to drop the dead lock")


def _lockable(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def test_none_leaves_the_kernel_placement(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    worker = start(redis_server, tmp_path, "--cpu-affinity", "none")
    try:
        worker.identity(r)
        for cpus in thread_cpus(worker.pid):
            assert _expand(cpus) == ALLOWED, cpus
        assert not list(tmp_path.glob("rfetch-cpu-*/cpu*"))
    finally:
        worker.kill()


def test_an_explicit_list_is_obeyed(
    redis_server: RedisServer, r: redis.Redis, tmp_path: Path
) -> None:
    cpu = max(ALLOWED)
    worker = start(redis_server, tmp_path, "--cpu-affinity", str(cpu))
    try:
        assert placed_on(worker, r) == str(cpu)
        assert set(thread_cpus(worker.pid)) == {str(cpu)}
    finally:
        worker.kill()


def test_a_cpu_the_process_may_not_use_is_a_clear_error(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    beyond = max(ALLOWED) + 1000
    worker = start(redis_server, tmp_path, "--cpu-affinity", str(beyond))
    assert worker.wait(120) != 0
    assert f"CPU {beyond} is not available to this process" in worker.log()


def test_a_malformed_setting_is_a_clear_error(redis_server: RedisServer, tmp_path: Path) -> None:
    worker = WorkerProcess(
        redis_server.url, ["-r", "testjobs"], env={"RFETCH_CPU_AFFINITY": "fastest"},
        log_dir=tmp_path,
    )
    assert worker.wait(120) != 0
    assert "cpu_affinity must be 'adaptive', 'auto', 'none' or a CPU list" in worker.log()


def _expand(text: str) -> frozenset[int]:
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return frozenset(cpus)
