"""The status pipe from a supervised worker process (a child) to its supervisor.

Each child gets the write end of its own pipe at fork; the supervisor reads the other end.
One message per line, ASCII:

* ``ready``: the child has beaten once and is fetching (its capacity counts from now).
* ``jobs <n>``: jobs this child has run so far (for ``--max-jobs``), sent when it changes,
  at most about once a second.
* ``retiring <reason>``: the child is leaving on its own (a job overran its hard time
  limit): it is quiet, will push back what it holds and exit with :data:`EXIT_RETIRED`, so
  the supervisor starts its replacement now instead of waiting for the exit.

End of file on the pipe says the child is gone; the supervisor still learns how from
``waitpid``. Messages are a convenience: the exit code alone is enough to be correct.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass

EXIT_RETIRED = 75
"""Exit code of a worker process that retired itself after a job overran its hard time
limit (``EX_TEMPFAIL``: systemd's ``Restart=on-failure`` and container restart policies
start it again). Its other jobs were pushed back first."""


@dataclass(frozen=True)
class Supervision:
    """What a supervised worker process knows of its swarm.

    Attributes:
        status: its end of the status pipe.
        parent_pid: the supervisor's pid (when ``os.getppid()`` differs, the parent died
            and the worker stops as on TERM).
        slot: its slot in the swarm (0-based).
        swarm: the parent's ``host:pid``, written in the heartbeat's ``info`` so the API
            and the web UI group a swarm's workers.
    """

    status: StatusWriter
    parent_pid: int
    slot: int
    swarm: str


@dataclass(frozen=True)
class Message:
    """One parsed status line: ``kind`` is ``ready``, ``jobs`` or ``retiring``."""

    kind: str
    count: int = 0
    reason: str = ""


class StatusWriter:
    """The child's end of the status pipe. Never raises: when the supervisor is gone the
    messages are dropped (the child notices its parent's death by ``os.getppid``).

    Args:
        fd: the write end of the pipe, or None (a worker with no supervisor: every method
            does nothing).
    """

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self._jobs_sent = -1

    def ready(self) -> None:
        """Say that the worker is running and fetching."""
        self._send("ready")

    def jobs(self, count: int) -> None:
        """Report the jobs run so far (sent only when it changed since the last report)."""
        if count != self._jobs_sent:
            self._jobs_sent = count
            self._send(f"jobs {count}")

    def retiring(self, reason: str) -> None:
        """Say that the worker is leaving on its own, and why (one line of text)."""
        self._send("retiring " + " ".join(reason.split()))

    def _send(self, text: str) -> None:
        if self.fd is None:
            return
        data = (text + "\n").encode("ascii", "replace")
        try:
            os.write(self.fd, data)  # under PIPE_BUF: one atomic write
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.EBADF):
                raise
            self.fd = None


class StatusReader:
    """The supervisor's side of one child's pipe: buffers partial lines."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> Iterator[Message]:
        """The complete messages in ``data`` plus what was buffered; unknown or malformed
        lines are skipped (a child never sends them; a partial line waits for its end)."""
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            message = parse(line.decode("ascii", "replace"))
            if message is not None:
                yield message


def parse(line: str) -> Message | None:
    """One status line as a :class:`Message`, or None if it is not one."""
    kind, _, rest = line.strip().partition(" ")
    if kind == "ready":
        return Message("ready")
    if kind == "jobs" and rest.isdigit():
        return Message("jobs", count=int(rest))
    if kind == "retiring":
        return Message("retiring", reason=rest or "retiring")
    return None
