"""Whether a process of this host still exists: the start-up recovery of its orphans.

A worker restarted by systemd after a kill -9 finds the private lists of its predecessor,
whose heartbeat has not expired yet. Its pid can answer at once whether it is gone: no
process has that pid, or the process with that pid started at another moment (the pid was
reused). Linux's ``/proc/<pid>/stat`` gives the start time in clock ticks since boot;
together with the boot id and the pid namespace (a container with the same host name has
its own pids) it names one process for good. Where ``/proc`` is missing, nothing is known
and nothing is decided here (the heartbeat-based recovery still applies).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProcessStamp:
    """What names a process on one Linux host for as long as it runs.

    Attributes:
        boot_id: ``/proc/sys/kernel/random/boot_id``: changes at each boot.
        pid_namespace: ``/proc/self/ns/pid`` link text, e.g. ``pid:[4026531836]``.
        pid: the process id in that namespace.
        start_ticks: start time, clock ticks after boot (field 22 of ``/proc/<pid>/stat``).
    """

    boot_id: str
    pid_namespace: str
    pid: int
    start_ticks: int

    def to_info(self) -> dict[str, Any]:
        """The form kept in the heartbeat's ``info`` (field ``proc``)."""
        return {
            "boot_id": self.boot_id,
            "pid_ns": self.pid_namespace,
            "pid": self.pid,
            "start": self.start_ticks,
        }

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> ProcessStamp | None:
        """Read the heartbeat's ``proc`` field; None if absent or malformed (a process of an
        older rfetch, or of Ruby Sidekiq)."""
        proc = info.get("proc")
        if not isinstance(proc, dict):
            return None
        try:
            return cls(str(proc["boot_id"]), str(proc["pid_ns"]), int(proc["pid"]),
                       int(proc["start"]))
        except (KeyError, TypeError, ValueError):
            return None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks after boot; None if unreadable."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall; fields[0] is field 3
    except (IndexError, ValueError):
        return None


def own_stamp() -> ProcessStamp | None:
    """This process's stamp; None where ``/proc`` does not give all of it."""
    boot_id = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    ticks = start_ticks(os.getpid())
    if boot_id is None or ticks is None:
        return None
    return ProcessStamp(boot_id.strip(), namespace, os.getpid(), ticks)


def is_gone(stamp: ProcessStamp, mine: ProcessStamp) -> bool:
    """Whether the process ``stamp`` names is known to have ended.

    Only a process of this boot and this pid namespace can be judged (another container or
    machine may use the same host name): it is gone when no process has its pid, or when
    the process that has it started at another tick (a reused pid). A process that exists
    but cannot be read (``hidepid``) is taken as alive.

    Args:
        stamp: the process to judge, from its heartbeat.
        mine: this process's own stamp.
    """
    if stamp.boot_id != mine.boot_id or stamp.pid_namespace != mine.pid_namespace:
        return False
    if stamp.pid == mine.pid:
        return stamp.start_ticks != mine.start_ticks
    try:
        os.kill(stamp.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # exists, owned by another user
    ticks = start_ticks(stamp.pid)
    return ticks is not None and ticks != stamp.start_ticks
