"""``--processes auto``: how many CPUs this process may use."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2's CPU quota of this process's group (``<quota> <period>`` or ``max <period>``),
what ``docker run --cpus`` and Kubernetes CPU limits set."""


def allowed_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPUs this process may use: its affinity mask (``taskset``, a cpuset), capped by
    the cgroup v2 CPU quota rounded up (a container limited to 1.5 CPUs gets 2), at least 1.

    Args:
        cpu_max: the cgroup ``cpu.max`` file to read (tests pass another).
    """
    affinity = getattr(os, "sched_getaffinity", None)  # absent on macOS
    cpus = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    quota = cgroup_quota(cpu_max)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def cgroup_quota(cpu_max: Path = CGROUP_CPU_MAX) -> float | None:
    """The cgroup v2 CPU quota in CPUs (``quota / period``), or None when there is none or
    the file cannot be read."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota == "max":
            return None
        value = int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None


def parse_processes(text: str, cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The value of ``--processes``: a whole number of 1 or more, or ``auto``.

    Raises:
        ValueError: anything else (the CLI turns it into a usage error).
    """
    if text.strip().lower() == "auto":
        return allowed_cpus(cpu_max)
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--processes must be a number or 'auto', got {text!r}") from None
    if value < 1:
        raise ValueError(f"--processes must be 1 or more, got {value}")
    return value
