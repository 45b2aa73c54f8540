"""Whether a process of this host still exists: the start-up recovery of its orphans.

A worker restarted by systemd after a kill -9 finds the private lists of its predecessor,
whose heartbeat has not expired yet. Its pid can answer at once whether it is gone: no
process has that pid, the process with that pid started at another moment (the pid was
reused), or it is a zombie (it has ended, but its parent, a shell or a supervisor, has not
reaped it yet: ``kill(pid, 0)`` still succeeds on it). Linux's ``/proc/<pid>/stat`` gives
the state and the start time in clock ticks since boot; together with the boot id and the
pid namespace (a container with the same host name has its own pids) the start time names
one process for good. Where ``/proc`` is missing, nothing is known and nothing is decided
here (the heartbeat-based recovery still applies).
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


ENDED_STATES = frozenset("ZX")
"""``/proc/<pid>/stat`` states of a process that has ended: zombie (not yet reaped by its
parent) and dead (being reaped)."""


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3 onwards of ``/proc/<pid>/stat`` (``[0]`` is the state); None if unreadable."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    return text[text.rfind(")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks after boot; None if unreadable."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None  # field 22 overall; fields[0] is field 3
    except (IndexError, ValueError):
        return None


def has_ended(pid: int) -> bool:
    """Whether ``pid`` is a process that has ended but was not reaped yet: a zombie (state
    ``Z`` in ``/proc/<pid>/stat``) or one being reaped (``X``). False when it runs, sleeps
    or is stopped, and when ``/proc`` cannot be read (nothing is known then)."""
    fields = _stat_fields(pid)
    return fields is not None and bool(fields) and fields[0] in ENDED_STATES


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
    machine may use the same host name): it is gone when no process has its pid, when
    the process that has it started at another tick (a reused pid), or when that process is
    a zombie: killed (kill -9, the OOM killer) but not reaped by a parent that does not wait
    for it (a shell, a supervisor), ``kill(pid, 0)`` still succeeds on it though it will
    never run again. A process that exists but cannot be read (``hidepid``) is taken as
    alive.

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
    if has_ended(stamp.pid):
        return True
    ticks = start_ticks(stamp.pid)
    return ticks is not None and ticks != stamp.start_ticks
