"""Adaptive CPU affinity (``--cpu-affinity adaptive``, the default): a worker process on
one CPU while that serves its jobs, on every allowed CPU while they get more done there.

Why both (:mod:`rfetch.worker.affinity`): on one CPU a GIL hand-off is a plain context switch, so
a process of near-empty or I/O-bound jobs runs them faster there (2.2x the no-op drain on
the 2-core VM); but C code that releases the GIL (hashlib or zlib on large inputs, numpy,
Pillow) then no longer runs on several CPUs at once (0.5x), and a neighbour process that
keeps that one CPU busy starves the worker. Which one a process needs depends on its jobs
and its host, so it is measured, not configured:

* the process starts pinned, on the CPU of its slot (as ``auto``);
* each window (``window`` seconds) in which it was saturated (a fetched job waiting for a
  thread, or every thread busy, in ``saturated_share`` of ``samples`` looks) measures the
  CPU it got: CPU seconds per wall second of every thread and of the children
  (:func:`tree_cpu`). A window in which it was not saturated is not judged: its CPU use says how
  much work there was, not how the work runs, so an idle process keeps its placement;
* after ``probe_after`` saturated windows in one placement, one window runs in the other
  (a probe). Spread wins when it got at least ``gain`` times the CPU the pinned windows
  got, and ``min_gain`` CPUs more: jobs that release the GIL use several CPUs (SHA-256 of
  64 MB: 1.9 CPUs against 1.0), while GIL-bound jobs only spend a little more of it on
  hand-offs between CPUs (no-op jobs: about 1.15 CPUs, for half the jobs), and I/O-bound
  jobs use too little for a ratio to mean anything. The winner is kept; a probe that
  keeps the placement doubles the saturated windows before the next one, up to
  ``probe_max``, so a steady process spends about one window in ``probe_max`` in the
  slower placement.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import psutil

from rfetch.errors import RfetchError
from rfetch.guard import Reporter, ThreadGuard
from rfetch.worker.affinity import Placement, format_cpus, pin_threads

log = logging.getLogger("rfetch.affinity")

Where = Literal["pinned", "spread"]
"""A placement: ``pinned`` (the CPU of the process's slot) or ``spread`` (every allowed
CPU)."""


@dataclass(frozen=True)
class Tuning:
    """The adaptive policy's numbers.

    Attributes:
        window: seconds of one measurement window.
        samples: saturation looks per window.
        saturated_share: share of a window's looks that must find the process saturated
            for the window to be judged.
        probe_after: saturated windows in a placement before the first probe of the other.
        probe_max: the most saturated windows between two probes (the wait doubles after
            each probe that keeps the placement).
        gain: how many times the pinned windows' CPU use a spread window must reach for
            spread to win.
        min_gain: CPUs a spread window must use beyond the pinned ones, too (jobs that
            use little CPU, such as I/O-bound ones, make ratios of noise).
    """

    window: float = 1.0
    samples: int = 10
    saturated_share: float = 0.8
    probe_after: int = 2
    probe_max: int = 300
    gain: float = 1.3
    min_gain: float = 0.25

    def __post_init__(self) -> None:
        if self.window <= 0 or self.samples < 1 or not 0 < self.saturated_share <= 1:
            raise RfetchError("adaptive affinity: window, samples and share must be positive")
        if self.probe_after < 1 or self.probe_max < self.probe_after:
            raise RfetchError("adaptive affinity: need 1 <= probe_after <= probe_max")
        if self.gain < 1 or self.min_gain < 0:
            raise RfetchError("adaptive affinity: need gain >= 1 and min_gain >= 0")


BASELINE_WINDOWS = 3
"""Saturated windows of the current placement averaged against a probe."""


class AffinityPolicy:
    """The decisions of adaptive affinity, from one window at a time; no clock and no
    system calls (the :class:`AdaptiveAffinity` thread measures and moves).

    Args:
        tuning: the policy's numbers.
    """

    def __init__(self, tuning: Tuning) -> None:
        self.tuning = tuning
        self.placement: Where = "pinned"
        """Where the process belongs now (during a probe, where it goes back to)."""
        self.probing = False
        self.next_probe = tuning.probe_after
        """Saturated windows in this placement before the next probe."""
        self.recent: list[float] = []
        """CPUs used in the last saturated windows of this placement."""
        self.last: tuple[float, float] | None = None
        """(pinned, spread) CPUs compared by the last probe."""
        self._count = 0

    @property
    def where(self) -> Where:
        """Where the process runs now."""
        return _other(self.placement) if self.probing else self.placement

    def observe(self, saturated: bool, cpus: float) -> Where | None:
        """One window ended: ``saturated`` (judged) or not, and the CPUs it used (process
        CPU seconds per wall second). Returns where to move the process now, if anywhere."""
        if self.probing:
            self.probing = False
            if not saturated:  # inconclusive: back, and probe again soon
                self._count = max(0, self.next_probe - 1)
                return self.placement
            mine = sum(self.recent) / len(self.recent)
            pinned, spread = (mine, cpus) if self.placement == "pinned" else (cpus, mine)
            self.last = (pinned, spread)
            tuning = self.tuning
            wins = spread >= tuning.gain * pinned and spread - pinned >= tuning.min_gain
            winner: Where = "spread" if wins else "pinned"
            self._count = 0
            if winner == self.placement:
                self.next_probe = min(self.tuning.probe_max, self.next_probe * 2)
                return self.placement
            self.placement = winner
            self.next_probe = self.tuning.probe_after
            self.recent = [cpus]
            return None
        if not saturated:
            return None
        self.recent = [*self.recent[-(BASELINE_WINDOWS - 1):], cpus]
        self._count += 1
        if self._count >= self.next_probe:
            self.probing = True
            return _other(self.placement)
        return None

    def refused(self, where: Where) -> None:
        """The kernel refused the move to ``where``: the process is still in the other
        placement, which it now belongs to; probes start over."""
        self.placement = _other(where)
        self.probing = False
        self._count = 0
        self.recent = []


def _other(placement: Where) -> Where:
    return "spread" if placement == "pinned" else "pinned"


@dataclass(frozen=True)
class Instruments:
    """What the thread reads and moves (tests give their own).

    Attributes:
        cpu_clock: CPU seconds of the process and its children (default :func:`tree_cpu`).
        wall_clock: monotonic seconds.
        apply: moves the process to the CPUs given (default: :meth:`AdaptiveAffinity`'s
            own move of the process and the children that inherited its pin).
    """

    cpu_clock: Callable[[], float] | None = None
    wall_clock: Callable[[], float] = time.monotonic
    apply: Callable[[frozenset[int]], None] | None = None


class AdaptiveAffinity:
    """The thread that measures a worker process and moves it between its pinned CPU and
    every allowed CPU by :class:`AffinityPolicy`.

    Args:
        placement: what :func:`rfetch.worker.affinity.apply` did with ``adaptive`` (pinned, with
            the CPUs allowed before).
        saturated: whether the process is saturated now (a fetched job waits for a thread,
            or every thread is busy): :meth:`rfetch.worker.manager.Manager.saturated`.
        report: the error reporter.
        tuning: the policy's numbers.
        instruments: the clocks and the move (default: the real ones).
    """

    def __init__(
        self,
        placement: Placement,
        saturated: Callable[[], bool],
        report: Reporter | None = None,
        tuning: Tuning | None = None,
        instruments: Instruments | None = None,
    ) -> None:
        instruments = instruments or Instruments()
        if not placement.adaptive:
            raise RfetchError("AdaptiveAffinity needs a placement made with 'adaptive'")
        self.pinned_cpus = placement.cpus
        self.allowed = placement.allowed
        self.saturated = saturated
        self.policy = AffinityPolicy(tuning or Tuning())
        self.cpu_clock = instruments.cpu_clock or tree_cpu
        self.wall_clock = instruments.wall_clock
        self.apply = instruments.apply or self._place
        self.moves = 0
        """Moves made so far (pinned or spread)."""
        self._last: tuple[float, float] | None = None
        """(CPU, wall) clock readings at the end of the last window."""
        self.guard = ThreadGuard("adaptive affinity", log, report, first=1.0, cap=60.0)

    @property
    def cpus(self) -> frozenset[int]:
        """The CPUs the process runs on now."""
        return self.allowed if self.policy.where == "spread" else self.pinned_cpus

    def run(self, stop: threading.Event) -> None:
        """Measure and move until ``stop`` is set; survives every exception (a move the
        kernel refuses is logged, and tried again at the next decision)."""
        tuning = self.policy.tuning
        pause = tuning.window / tuning.samples
        while not stop.is_set():
            try:
                self.window(stop, pause)
            except Exception as exc:
                stop.wait(self.guard.failed(exc))
            else:
                self.guard.succeeded()

    def window(self, stop: threading.Event, pause: float) -> None:
        """Measure one window (``pause`` seconds between looks) and act on it.

        Raises:
            OSError: the kernel refused a move (the process stays where it was).
        """
        tuning = self.policy.tuning
        # A window starts where the last one ended: one reading of the clocks per window
        # (tree_cpu scans the process table for children).
        cpu0, wall0 = self._last or (self.cpu_clock(), self.wall_clock())
        self._last = None
        busy = 0
        for _ in range(tuning.samples):
            if stop.wait(pause):
                return
            busy += bool(self.saturated())
        cpu1, wall1 = self.cpu_clock(), self.wall_clock()
        self._last = (cpu1, wall1)
        wall = wall1 - wall0
        cpus = (cpu1 - cpu0) / wall if wall > 0 else 0.0
        judged = busy >= tuning.saturated_share * tuning.samples
        before = self.policy.where
        placement = self.policy.placement
        move = self.policy.observe(judged, cpus)
        if move is not None and move != before:
            self.move(move)
        if self.policy.placement != placement:
            pinned, spread = self.policy.last or (0.0, 0.0)
            log.info(
                "adaptive affinity: %s CPUs %s (a busy window used %.2f CPUs spread, %.2f "
                "pinned)", "spread over" if self.policy.placement == "spread" else "back on",
                format_cpus(self.cpus), spread, pinned)
        elif move is not None and self.policy.probing:
            log.debug("adaptive affinity: probing CPUs %s (%.2f CPUs used on %s)",
                      format_cpus(self.cpus), cpus, format_cpus(self._cpus_of(before)))
        elif move is not None:
            log.debug("adaptive affinity: stays on CPUs %s (%s; next probe after %d busy "
                      "windows)", format_cpus(self.cpus), self._probe_text(judged),
                      self.policy.next_probe)

    def _probe_text(self, judged: bool) -> str:
        if not judged or self.policy.last is None:
            return "the probe was not busy enough to judge"
        pinned, spread = self.policy.last
        return f"{spread:.2f} CPUs used spread, {pinned:.2f} pinned"

    def _place(self, cpus: frozenset[int]) -> None:
        place(cpus, self.pinned_cpus if cpus == self.allowed else self.allowed)

    def _cpus_of(self, where: Where) -> frozenset[int]:
        return self.allowed if where == "spread" else self.pinned_cpus

    def move(self, where: Where) -> None:
        """Move every thread of the process.

        Raises:
            OSError: the kernel refused; the policy is told the process stayed (a probe
                is abandoned; a decision is tried again at the next probe).
        """
        try:
            self.apply(self._cpus_of(where))
        except OSError:
            self.policy.refused(where)
            raise
        self.moves += 1


def tree_cpu() -> float:
    """CPU seconds (user and system) of this process, every thread, and of its children:
    those running (and theirs, through psutil) and those that ended and were waited for
    (:func:`os.times`), so jobs that run their work in a subprocess (an image or video
    tool) count as the work they are."""
    total = time.process_time()
    ended = os.times()
    total += ended.children_user + ended.children_system
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                times = child.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
    return total


def place(cpus: frozenset[int], before: frozenset[int]) -> None:
    """Move every thread of this process to ``cpus``, and the threads of its running
    children that are still on ``before`` (started by a job, they inherited it); a thread
    placed otherwise is left alone.

    Raises:
        OSError: the kernel refused to move a thread of this process.
    """
    pin_threads(cpus)
    children: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(OSError):  # ended meanwhile, or not ours to move
            for tid in os.listdir(f"/proc/{child.pid}/task"):
                with contextlib.suppress(OSError):
                    if frozenset(os.sched_getaffinity(int(tid))) == before:
                        os.sched_setaffinity(int(tid), cpus)

def start(
    placement: Placement, saturated: Callable[[], bool], report: Reporter | None = None
) -> AdaptiveAffinity | None:
    """Run :class:`AdaptiveAffinity` on a daemon thread for the life of the process when
    ``placement`` was made by ``adaptive``; None otherwise (nothing to steer)."""
    if not placement.adaptive:
        return None
    steer = AdaptiveAffinity(placement, saturated, report)
    threading.Thread(
        target=steer.run, args=(threading.Event(),), name="rfetch-affinity", daemon=True
    ).start()
    return steer
