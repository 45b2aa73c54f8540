"""Adaptive CPU affinity: the policy's decisions window by window, and the thread that
measures and moves, with fake clocks and a fake ``sched_setaffinity`` (a real process is
moved in tests/integration/test_affinity_worker.py)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

import pytest

from rfetch.errors import RfetchError
from rfetch.worker.adaptive_affinity import (
    AdaptiveAffinity,
    AffinityPolicy,
    Instruments,
    Tuning,
    place,
    start,
    tree_cpu,
)
from rfetch.worker.affinity import Placement

TUNING = Tuning(probe_after=2, probe_max=8, gain=1.3)


def test_a_busy_pinned_process_is_probed_and_spreads_when_its_jobs_run_in_parallel() -> None:
    policy = AffinityPolicy(TUNING)
    assert policy.observe(True, 1.0) is None
    assert policy.observe(True, 1.0) == "spread"
    assert (policy.where, policy.placement, policy.probing) == ("spread", "pinned", True)
    assert policy.observe(True, 1.9) is None  # already there: it stays
    assert (policy.where, policy.placement) == ("spread", "spread")
    assert policy.last == (1.0, 1.9)


def test_a_probe_that_gains_too_little_goes_back_and_backs_off() -> None:
    policy = AffinityPolicy(TUNING)
    assert [policy.observe(True, 1.0) for _ in range(2)] == [None, "spread"]
    assert policy.observe(True, 1.25) == "pinned"  # 1.25 < 1.3 x 1.0
    assert (policy.where, policy.next_probe) == ("pinned", 4)
    assert [policy.observe(True, 1.0) for _ in range(4)] == [None, None, None, "spread"]
    assert policy.observe(True, 1.1) == "pinned"
    assert policy.next_probe == 8
    assert [policy.observe(True, 1.0) for _ in range(8)][-1] == "spread"
    assert policy.observe(True, 1.0) == "pinned"
    assert policy.next_probe == 8, "capped at probe_max"


def test_the_gain_is_relative_to_what_the_pinned_cpu_gave() -> None:
    """A neighbour keeps the pinned CPU busy: the process gets half of it, and spread gets
    it a whole CPU elsewhere, though its jobs hold the GIL."""
    policy = AffinityPolicy(TUNING)
    policy.observe(True, 0.5)
    policy.observe(True, 0.5)
    assert policy.observe(True, 0.95) is None
    assert policy.placement == "spread"


def test_a_spread_process_probes_its_cpu_and_goes_back_when_the_jobs_change() -> None:
    policy = AffinityPolicy(TUNING)
    policy.observe(True, 1.0)
    policy.observe(True, 1.0)
    policy.observe(True, 1.9)
    assert policy.placement == "spread"
    # spread and still parallel: the probe of the pinned CPU loses, spread stays
    assert [policy.observe(True, 1.9) for _ in range(2)] == [None, "pinned"]
    assert policy.observe(True, 1.0) == "spread"
    assert (policy.placement, policy.next_probe) == ("spread", 4)
    # the jobs turn serial: spread gives 1.15, pinned 1.0 at the next probe
    assert [policy.observe(True, 1.15) for _ in range(4)][-1] == "pinned"
    assert policy.observe(True, 1.0) is None
    assert (policy.where, policy.placement, policy.next_probe) == ("pinned", "pinned", 2)


def test_jobs_that_use_little_cpu_stay_pinned_whatever_the_ratio() -> None:
    """I/O-bound jobs: 0.05 CPUs pinned, 0.12 spread is noise, not a gain."""
    policy = AffinityPolicy(TUNING)
    policy.observe(True, 0.05)
    policy.observe(True, 0.05)
    assert policy.observe(True, 0.12) == "pinned"


def test_windows_that_are_not_saturated_are_not_judged() -> None:
    policy = AffinityPolicy(TUNING)
    for _ in range(50):
        assert policy.observe(False, 0.1) is None  # idle: no probe, whatever the time
    assert policy.where == "pinned"
    assert policy.observe(True, 1.0) is None
    assert policy.observe(True, 1.0) == "spread"
    # the probe window was not saturated: inconclusive, back, and the next busy window
    # probes again without backing off
    assert policy.observe(False, 0.3) == "pinned"
    assert policy.next_probe == 2
    assert policy.observe(True, 1.0) == "spread"


def test_a_refused_move_leaves_the_policy_where_the_process_is() -> None:
    policy = AffinityPolicy(TUNING)
    policy.observe(True, 1.0)
    assert policy.observe(True, 1.0) == "spread"
    policy.refused("spread")
    assert (policy.where, policy.probing) == ("pinned", False)
    assert [policy.observe(True, 1.0) for _ in range(2)] == [None, "spread"]


@pytest.mark.parametrize(
    "kwargs",
    [{"window": 0}, {"samples": 0}, {"saturated_share": 1.5}, {"probe_after": 0},
     {"probe_after": 5, "probe_max": 4}, {"gain": 0.9}, {"min_gain": -0.1}],
)
def test_bad_tuning_is_a_clear_error(kwargs: dict[str, float]) -> None:
    with pytest.raises(RfetchError, match="adaptive affinity"):
        Tuning(**kwargs)  # type: ignore[arg-type]


class Clocks:
    """A wall clock that the samples advance, and a CPU clock charged per wall second at
    ``pinned`` or ``spread`` CPUs, by where the process is."""

    def __init__(self, pinned: float = 1.0, spread: float = 1.0) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.rates = {frozenset({1}): pinned, frozenset({0, 1}): spread}
        self.where = frozenset({1})

    def tick(self, seconds: float) -> None:
        self.wall += seconds
        self.cpu += seconds * self.rates[self.where]


class FakeStop(threading.Event):
    """``wait`` advances the fake clocks instead of sleeping; set after ``limit`` waits."""

    def __init__(self, clocks: Clocks, limit: int) -> None:
        super().__init__()
        self.clocks = clocks
        self.limit = limit

    def wait(self, timeout: float | None = None) -> bool:
        self.limit -= 1
        if self.limit < 0:
            self.set()
            return True
        self.clocks.tick(timeout or 0.0)
        return False


PLACEMENT = Placement(frozenset({1}), "adaptive, slot cpu1.0", True, None,
                      frozenset({0, 1}), True)


def steer(clocks: Clocks, applied: list[frozenset[int]], busy: bool = True,
          fail: bool = False) -> AdaptiveAffinity:
    def apply(cpus: frozenset[int]) -> None:
        if fail:
            raise OSError(22, "Invalid argument")
        applied.append(cpus)
        clocks.where = cpus

    return AdaptiveAffinity(
        PLACEMENT, lambda: busy, tuning=TUNING, instruments=Instruments(
            cpu_clock=lambda: clocks.cpu, wall_clock=lambda: clocks.wall, apply=apply,
        ),
    )


def test_the_thread_measures_cpu_per_wall_second_and_moves_every_thread(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clocks, applied = Clocks(1.0, 1.9), []  # type: list[frozenset[int]]
    subject = steer(clocks, applied)
    with caplog.at_level(logging.INFO, "rfetch.affinity"):
        subject.run(FakeStop(clocks, 10 * 4))
    assert applied == [frozenset({0, 1})]
    assert subject.cpus == {0, 1}
    assert "spread over CPUs 0-1 (a busy window used 1.90 CPUs spread, 1.00 pinned)" in (
        caplog.text
    )


def test_serial_work_goes_back_to_its_cpu() -> None:
    clocks, applied = Clocks(1.0, 1.15), []  # type: list[frozenset[int]]
    subject = steer(clocks, applied)
    subject.run(FakeStop(clocks, 10 * 3))
    assert applied == [frozenset({0, 1}), frozenset({1})]
    assert subject.policy.last == pytest.approx((1.0, 1.15))
    assert subject.cpus == {1}
    assert subject.policy.next_probe == 4


def test_an_idle_process_is_never_moved() -> None:
    clocks, applied = Clocks(), []  # type: list[frozenset[int]]
    subject = steer(clocks, applied, busy=False)
    subject.run(FakeStop(clocks, 10 * 20))
    assert applied == []


def test_a_refused_move_is_logged_and_the_thread_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clocks, applied = Clocks(), []  # type: list[frozenset[int]]
    subject = steer(clocks, applied, fail=True)
    with caplog.at_level(logging.INFO, "rfetch.affinity"):
        subject.run(FakeStop(clocks, 10 * 6))
    assert subject.policy.where == "pinned", "a refused spread leaves it pinned"
    assert "adaptive affinity" in caplog.text and "Invalid argument" in caplog.text


def test_any_exception_of_the_saturation_check_is_survived() -> None:
    clocks, applied = Clocks(), []  # type: list[frozenset[int]]
    calls = 0

    def saturated() -> bool:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("a bug")
        return True

    subject = AdaptiveAffinity(
        PLACEMENT, saturated, tuning=TUNING, instruments=Instruments(
            cpu_clock=lambda: clocks.cpu, wall_clock=lambda: clocks.wall, apply=applied.append,
        ),
    )
    subject.run(FakeStop(clocks, 60))
    assert calls > 10, "the loop went on after the exception"
    assert applied, "and still moved the process"


def test_only_an_adaptive_placement_is_steered() -> None:
    fixed = Placement(frozenset({1}), "auto, slot cpu1.0", True)
    assert start(fixed, lambda: True) is None
    with pytest.raises(RfetchError, match="adaptive"):
        AdaptiveAffinity(fixed, lambda: True)


ALLOWED = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()


@pytest.mark.skipif(len(ALLOWED) < 2, reason="needs Linux and two CPUs this process may use")
def test_spreading_moves_the_children_that_inherited_the_pin_and_only_those() -> None:
    """A job's subprocess started while pinned is spread with the process; one that a job
    placed on another CPU itself is left there. (The test process is already spread, so
    moving its own threads to every allowed CPU changes nothing.)"""
    first, second = sorted(ALLOWED)[:2]
    code = "import time; time.sleep(30)"
    inherited = subprocess.Popen([sys.executable, "-c", code])
    placed = subprocess.Popen([sys.executable, "-c", code])
    try:
        os.sched_setaffinity(inherited.pid, {first})
        os.sched_setaffinity(placed.pid, {second})
        place(ALLOWED, frozenset({first}))
        assert frozenset(os.sched_getaffinity(inherited.pid)) == ALLOWED
        assert os.sched_getaffinity(placed.pid) == {second}
        assert frozenset(os.sched_getaffinity(0)) == ALLOWED
    finally:
        inherited.kill()
        placed.kill()
        inherited.wait()
        placed.wait()


def test_the_cpu_clock_counts_the_work_of_children() -> None:
    before = tree_cpu()
    subprocess.run(
        [sys.executable, "-c", "import time\nend = time.process_time() + 0.3\n"
         "while time.process_time() < end: pass"],
        check=True,
    )
    assert tree_cpu() - before >= 0.3
