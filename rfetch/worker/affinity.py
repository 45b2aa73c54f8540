"""CPU affinity of a worker process: every thread of it on one CPU.

Why: CPython runs Python code in one thread at a time (the GIL), so one worker process never
uses more than one CPU's worth of Python, whatever its concurrency. A job's Redis round trip
releases the GIL twice (send, receive). When the thread that takes the GIL next sleeps on
another CPU, the hand-off waits for that CPU to wake up (an inter-processor interrupt, slow
on virtual machines) and the GIL stays free meanwhile; on one CPU a hand-off is a plain
context switch. Measured on a 2-core VM (benchmarks/README.md): ten threads doing
INCR through redis-py, 8,391/s spread over both CPUs and 20,969/s on one; ``rfetch worker
-c 10`` draining no-op jobs, 5,317 jobs/s spread and 11,353 on one CPU.

The cost: work that runs outside the GIL (C code that releases it: hashlib and zlib on large
inputs, numpy, Pillow) no longer runs on several CPUs at once inside one process. So the
default, ``adaptive``, pins as ``auto`` does and then lets
:class:`rfetch.worker.adaptive_affinity.AdaptiveAffinity` spread the process over every
allowed CPU while that is measured to get it more CPU; ``--cpu-affinity none`` keeps the
kernel's placement; more worker processes use more CPUs either way.

``auto`` (and ``adaptive``) spreads the worker processes of one host over its CPUs without
asking anyone: a process holds an exclusive ``flock`` on one slot file
``<lock dir>/cpu<N>.<slot>`` for its whole life, and the kernel drops the lock when the process
ends, however it ends (kill -9 included), so a slot is never left taken by a dead process.
The first free slot wins, trying slot 0 of every allowed CPU (starting with the CPU the
process runs on, where the kernel placed it at exec as the idlest), then slot 1 of every
CPU, and so on: N workers on C CPUs get ceil(N / C) or floor(N / C) each.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rfetch.config_checks import ADAPTIVE, AUTO, NONE, parse_cpu_list
from rfetch.errors import ConfigError

log = logging.getLogger("rfetch.affinity")

MAX_SLOTS = 256
"""Slots tried per CPU before ``auto`` gives up and leaves placement to the kernel."""


@dataclass
class Placement:
    """Where a worker process runs after :func:`apply`.

    Attributes:
        cpus: the CPUs every thread of the process may run on now.
        how: how they were chosen, for the log line (``auto, slot cpu1.0``, ``--cpu-affinity
            0-1``, or why nothing was changed).
        pinned: whether the affinity was changed.
        lock_fd: the open slot file whose ``flock`` holds the slot (``auto``, ``adaptive``);
            it stays open for the life of the process, and the kernel closes it at exit.
            None when no slot is held.
        allowed: the CPUs the process could use before (empty when unknown).
        adaptive: pinned by ``adaptive``: :class:`rfetch.worker.adaptive_affinity.
            AdaptiveAffinity` may spread it over ``allowed`` and pin it again.
    """

    cpus: frozenset[int]
    how: str
    pinned: bool
    lock_fd: int | None = None
    allowed: frozenset[int] = frozenset()
    adaptive: bool = False


def default_lock_dir() -> Path:
    """The slot files' folder: ``<temp dir>/rfetch-cpu-<uid>`` (one per user, so users
    do not share locks they may not be able to open)."""
    return Path(tempfile.gettempdir()) / f"rfetch-cpu-{os.getuid()}"


def current_cpu() -> int | None:
    """The CPU this thread last ran on (``/proc/self/stat`` field 39), or None."""
    try:
        stat = Path("/proc/self/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[36])  # field 39; the list starts at field 3 (state)
    except (IndexError, ValueError):
        return None


def slot_order(allowed: Iterable[int], current: int | None) -> list[int]:
    """The allowed CPUs in the order ``auto`` tries them: from ``current`` upwards, wrapping
    around (ascending from the lowest when ``current`` is not allowed)."""
    cpus = sorted(allowed)
    if current in cpus:
        at = cpus.index(current)
        cpus = cpus[at:] + cpus[:at]
    return cpus


def take_slot(cpus: Sequence[int], lock_dir: Path) -> tuple[int, int, int] | None:
    """Take the first free slot: slot 0 of each CPU in ``cpus`` order, then slot 1, ...

    Returns:
        (cpu, slot, open file descriptor holding the lock), or None when the folder cannot
        be used or every slot up to ``MAX_SLOTS`` is taken.
    """
    try:
        lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("cpu affinity: cannot use %s (%s); placement left to the kernel", lock_dir,
                    exc)
        return None
    for slot in range(MAX_SLOTS):
        for cpu in cpus:
            path = lock_dir / f"cpu{cpu}.{slot}"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                log.warning("cpu affinity: cannot open %s (%s); placement left to the kernel",
                            path, exc)
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            return cpu, slot, fd
    return None


def pin_threads(cpus: Iterable[int]) -> None:
    """Set the affinity of every thread of this process (``/proc/self/task``) to ``cpus``;
    threads started later inherit it from the thread that starts them.

    Raises:
        OSError: the kernel refused (e.g. a CPU outside the process's cgroup cpuset).
    """
    mask = set(cpus)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), mask)
        except ProcessLookupError:  # the thread ended meanwhile
            continue


def gil_enabled() -> bool:
    """False on a free-threaded CPython running without the GIL (3.13+), where threads
    do run Python code in parallel and one CPU would be a limit, not a help."""
    probe = getattr(sys, "_is_gil_enabled", None)
    return True if probe is None else bool(probe())


def apply(setting: str, lock_dir: Path | None = None) -> Placement:
    """Apply ``--cpu-affinity`` to the whole process (call it in a worker process only, before
    it starts its threads or right after: existing threads are pinned too).

    Args:
        setting: ``adaptive``, ``auto``, ``none`` or a CPU list (``0-3,6``).
        lock_dir: the slot files' folder for ``auto`` (default :func:`default_lock_dir`).

    Returns:
        The placement; with ``auto`` and ``adaptive`` its ``lock_fd`` must stay open while
        the process runs. ``adaptive`` pins as ``auto`` does (the caller then runs
        :class:`rfetch.worker.adaptive_affinity.AdaptiveAffinity`).

    Raises:
        ConfigError: a CPU list that names a CPU this process may not use, or that the
            kernel refused.
    """
    if not hasattr(os, "sched_setaffinity"):
        return Placement(frozenset(), "not supported on this system", False)
    allowed = frozenset(os.sched_getaffinity(0))
    if setting == NONE:
        return Placement(allowed, "--cpu-affinity none", False)
    if setting not in (AUTO, ADAPTIVE):
        wanted = parse_cpu_list(setting)
        outside = sorted(wanted - allowed)
        if outside:
            raise ConfigError(
                f"cpu_affinity {setting!r}: CPU {outside[0]} is not available to this process "
                f"(allowed: {format_cpus(allowed)})"
            )
        try:
            pin_threads(wanted)
        except OSError as exc:
            raise ConfigError(f"cpu_affinity {setting!r}: the kernel refused: {exc}") from None
        return Placement(wanted, f"--cpu-affinity {setting}", True)
    if len(allowed) < 2:
        return Placement(allowed, f"{setting}: only one CPU is available", False)
    if not gil_enabled():
        return Placement(allowed, f"{setting}: the GIL is disabled, threads run in parallel",
                         False)
    taken = take_slot(slot_order(allowed, current_cpu()), lock_dir or default_lock_dir())
    if taken is None:
        return Placement(allowed, f"{setting}: no free slot", False)
    cpu, slot, fd = taken
    try:
        pin_threads({cpu})
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):  # threads pinned before the refusal get back
            pin_threads(allowed)  # every allowed CPU
        log.warning("cpu affinity: could not pin to CPU %d (%s); placement left to the kernel",
                    cpu, exc)
        return Placement(allowed, f"{setting}: pinning refused ({exc})", False)
    return Placement(frozenset({cpu}), f"{setting}, slot cpu{cpu}.{slot}", True, fd, allowed,
                     setting == ADAPTIVE)


def format_cpus(cpus: Iterable[int]) -> str:
    """``{0, 1, 2, 5}`` -> ``"0-2,5"`` (the kernel's list format)."""
    ordered = sorted(cpus)
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
