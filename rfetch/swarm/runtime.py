"""The swarm's parent process: forks the children, turns signals, status lines and reaped
processes into calls on the :class:`~rfetch.swarm.supervisor.Supervisor`, and sets the
process title.

The parent runs one thread and no Redis work beyond recovering a dead child's private
lists (``recover``). It forks after the ``-r`` modules were imported, so every child
starts with the application's code loaded once; each child then builds its own worker
(connections, threads, CPU slot, logging) after the fork, never sharing the parent's.

It reaps every process that ends (``waitpid(-1)``), not only its children: run as PID 1 in
a container, it also reaps the orphans the kernel hands to it, so none stays a zombie.
Children run in their own process group, so a Ctrl-C or Ctrl-Z at a terminal reaches only
the parent, which passes it on once (a second INT to a worker would stop it at once).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import secrets
import selectors
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import NoReturn

import psutil

from rfetch.config import Config
from rfetch.swarm.channel import StatusReader, StatusWriter
from rfetch.swarm.supervisor import Supervisor

log = logging.getLogger("rfetch.swarm")

HANDLED_SIGNALS = ("TERM", "INT", "TSTP", "TTIN", "USR2", "HUP", "CHLD")
"""Signals the parent handles (CHLD only wakes it up to reap)."""


@dataclass(frozen=True)
class ChildSpec:
    """What a forked child is told.

    Attributes:
        slot: its slot in the swarm (0-based).
        identity: the worker identity it must use (``host:pid:hex``), which the parent
            also knows, to recover its private lists when it dies.
        parent_pid: the supervisor's pid (a child whose parent is gone stops by itself).
        status: the child's end of its status pipe.
    """

    slot: int
    identity: str
    parent_pid: int
    status: StatusWriter


ChildTarget = Callable[[ChildSpec], int]
"""What a child runs after the fork; its return value is the child's exit code."""


def set_title(text: str) -> None:
    """Set the process title (``ps``, ``top``)."""
    try:
        import setproctitle
    except ImportError:  # pragma: no cover - a declared dependency
        return
    setproctitle.setproctitle(text)


class ForkedProcesses:
    """The real :class:`~rfetch.swarm.supervisor.Processes`: ``os.fork``, ``os.kill`` and
    psutil.

    Args:
        target: what each child runs.
        selector: where the read ends of the status pipes are registered (data: the pid).
        parent_fds: descriptors of the parent that a child closes at once (the signal
            wake-up pipe).
    """

    def __init__(
        self, target: ChildTarget, selector: selectors.BaseSelector, parent_fds: tuple[int, ...]
    ) -> None:
        self.target = target
        self.selector = selector
        self.parent_fds = parent_fds
        self.readers: dict[int, StatusReader] = {}
        self.hostname = socket.gethostname()

    def spawn(self, slot: int) -> tuple[int, str]:
        """Fork a child running ``target``; its (pid, identity).

        Raises:
            OSError: the fork or the pipe failed.
        """
        nonce = secrets.token_hex(6)
        if threading.active_count() > 1:
            log.warning("forking with %d threads running in the parent", threading.active_count())
        read_fd, write_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            raise
        if pid == 0:
            self._become_child(slot, nonce, parent, read_fd, write_fd)
        os.close(write_fd)
        os.set_blocking(read_fd, False)
        self.selector.register(read_fd, selectors.EVENT_READ, pid)
        self.readers[read_fd] = StatusReader()
        return pid, f"{self.hostname}:{pid}:{nonce}"

    def send(self, pid: int, name: str) -> None:
        """Send ``SIG<name>`` to ``pid``; nothing if it has gone."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.Signals[f"SIG{name}"])

    def rss_mb(self, pid: int) -> float | None:
        """Resident memory of ``pid`` in MiB (psutil), or None if it has gone."""
        try:
            return float(psutil.Process(pid).memory_info().rss) / (1024 * 1024)
        except psutil.Error:
            return None

    def read(self, fd: int, supervisor: Supervisor, pid: int) -> None:
        """Pass the status lines waiting on ``fd`` to ``supervisor``; close it at EOF."""
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.selector.unregister(fd)
            self.readers.pop(fd, None)
            os.close(fd)
            return
        for message in self.readers[fd].feed(data):
            supervisor.message(pid, message)

    def _become_child(
        self, slot: int, nonce: str, parent: int, read_fd: int, write_fd: int
    ) -> NoReturn:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for name in HANDLED_SIGNALS:
                signal.signal(signal.Signals[f"SIG{name}"], signal.SIG_DFL)
            for fd in (read_fd, *self.parent_fds, *self.readers):
                os.close(fd)
            self.selector.close()
            os.setpgid(0, 0)
            identity = f"{self.hostname}:{os.getpid()}:{nonce}"
            code = self.target(ChildSpec(slot, identity, parent, StatusWriter(write_fd)))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)


def run_swarm(
    config: Config,
    target: ChildTarget,
    recover: Callable[[str], object] | None = None,
) -> int:
    """Run the swarm until it is stopped (TERM/INT); the parent's exit code.

    Must run in the main thread (signal handlers), ideally with no other thread alive
    (each fork copies only the forking thread).

    Args:
        config: the swarm's settings (see :class:`~rfetch.swarm.supervisor.Supervisor`).
        target: what each child runs; it returns the child's exit code.
        recover: pushes back the private lists of an exited child (by identity).

    Returns:
        0 when every child stopped by itself, 1 when some had to be killed.
    """
    selector = selectors.DefaultSelector()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    selector.register(wake_read, selectors.EVENT_READ, None)
    pending: collections.deque[str] = collections.deque()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        pending.append(signal.Signals(signum).name[3:])

    previous = {
        name: signal.signal(signal.Signals[f"SIG{name}"], on_signal) for name in HANDLED_SIGNALS
    }
    old_wakeup = signal.set_wakeup_fd(wake_write)
    processes = ForkedProcesses(target, selector, (wake_read, wake_write))
    supervisor = Supervisor(config, processes, recover)
    try:
        supervisor.start()
        while not supervisor.finished:
            set_title(supervisor.title())
            for key, _ in selector.select(supervisor.next_wait()):
                if key.data is None:
                    _drain(wake_read)
                else:
                    processes.read(key.fd, supervisor, key.data)
            while pending:
                name = pending.popleft()
                if name != "CHLD":
                    supervisor.signal(name)
            _reap(supervisor)
            supervisor.tick()
        log.info("swarm stopped")
        return supervisor.exit_code
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for name, handler in previous.items():
            signal.signal(signal.Signals[f"SIG{name}"], handler)
        selector.close()
        for fd in (wake_read, wake_write, *processes.readers):
            os.close(fd)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _reap(supervisor: Supervisor) -> None:
    """Reap every process that has ended (children, and orphans when PID 1)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        supervisor.exited(pid, os.waitstatus_to_exitcode(status))
