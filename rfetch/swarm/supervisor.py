"""The swarm's decisions: which child to start, signal, replace or kill, and when.

Sidekiq Enterprise's swarm, for rfetch: one parent supervises ``processes`` worker
processes (children), each a full worker with its own identity, heartbeat and private
lists. The :class:`Supervisor` holds no process machinery: it is driven by the runtime
(:mod:`rfetch.swarm.runtime`) with what happened (a signal, a status message, a reaped
child, the passing of time) and acts through a :class:`Processes` (fork, signal, measure),
so its rules are tested with a fake process table and a fake clock.

The rules:

* A child that dies unexpectedly is replaced at once (with :class:`RestartBackoff` when
  its slot's children keep dying at start), and the dead child's private lists are handed
  to ``recover`` at once: the parent knows it died, no heartbeat has to expire first.
* A *planned* replacement, a recycle (USR2's rolling restart, ``--max-memory``,
  ``--max-jobs``), sends the old child USR1 and forks the new one at the same time. The old
  child goes quiet, lets its running jobs finish with no ``-t`` deadline (a recycle is not
  a deploy: nothing is pushed back, so nothing runs twice because of it) and exits 0; it
  gets no TERM and is never killed for taking long. The next planned replacement waits
  until the new child said ``ready``. Capacity (ready children not leaving) is thus never
  below ``processes - 1`` because of planned replacements; old children still finishing
  their jobs exist beside the new ones until they do. A TERM/INT to the parent meanwhile
  reaches them too (their one TERM: ``-t``, then push back).
* A child that retires itself (a job overran its hard time limit) is replaced at once.
* TSTP quiets every child; a quiet swarm starts and replaces no child (Sidekiq's quiet
  is final). TERM/INT: every child does its own TERM (push back after ``-t``) and the
  parent finishes when all have exited; a second TERM/INT is passed on, so the children
  stop at once. A child still alive ``-t`` plus the time its shutdown may take after its
  TERM is killed (and its lists recovered).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol

from rfetch.config import Config
from rfetch.swarm.channel import EXIT_RETIRED, Message
from rfetch.swarm.children import Child, ChildTable
from rfetch.swarm.policy import RestartBackoff, recycle_reason
from rfetch.version import __version__

log = logging.getLogger("rfetch.swarm")

FORK_RETRY = 1.0
"""Seconds before trying again when ``fork`` itself failed (EAGAIN, ENOMEM)."""

RECYCLE_CHECK = 1.0
"""Seconds between two looks at the children's memory and job counts."""


class Processes(Protocol):
    """What the supervisor does to processes (the runtime forks; tests fake it)."""

    def spawn(self, slot: int) -> tuple[int, str]:
        """Fork a worker process for ``slot``; its (pid, identity).

        Raises:
            OSError: the fork failed.
        """

    def send(self, pid: int, name: str) -> None:
        """Send signal ``name`` (``"TERM"``, ``"TSTP"``, ...) to ``pid``; no error if it
        is gone."""

    def rss_mb(self, pid: int) -> float | None:
        """Resident memory of ``pid`` in MiB, or None if unknown (gone)."""


class Supervisor:
    """Keeps ``config.processes`` worker processes running.

    Args:
        config: ``processes``, ``max_memory`` (MiB), ``max_jobs``, ``shutdown_timeout``
            (``-t``), ``block_timeout`` and ``network_timeout`` (how long a child's
            shutdown may take after ``-t``), ``tag``.
        processes: forks, signals and measures the children.
        recover: called with the identity of every child that ended without its own clean
            shutdown (an exit code other than 0 and ``EXIT_RETIRED``, or a signal), to push
            its private lists back now; None to leave that to orphan recovery.
        clock: monotonic seconds (tests pass a fake clock).
        backoff: restart delays (default :class:`RestartBackoff`).
    """

    def __init__(
        self,
        config: Config,
        processes: Processes,
        recover: Callable[[str], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
        backoff: RestartBackoff | None = None,
    ) -> None:
        self.config = config
        self.processes = processes
        self.recover = recover
        self.clock = clock
        self.backoff = backoff or RestartBackoff()
        self.children = ChildTable()
        self.quiet = False
        self.stopping = False
        self.killed = 0
        self._restarts: dict[int, float] = {}
        self._rolling: list[int] = []
        self._replacing: int | None = None
        self._next_recycle_check = 0.0
        self._stop_grace = config.shutdown_timeout + config.block_timeout + (
            config.network_timeout + 5.0
        )

    # -- what the runtime reports ----------------------------------------------------------

    def start(self) -> None:
        """Fork the first children, one per slot."""
        log.info("swarm of %d worker processes starting", self.config.processes)
        for slot in range(self.config.processes):
            self._spawn(slot, self.clock())

    def signal(self, name: str) -> None:
        """Act on a signal the parent received (``"TSTP"``, ``"TERM"``, ``"INT"``,
        ``"TTIN"``, ``"USR2"``; others are logged and ignored)."""
        if name == "TSTP":
            self._quiet_down()
        elif name in ("TERM", "INT"):
            self._stop(name)
        elif name == "TTIN":
            for child in self.children:
                self.processes.send(child.pid, "TTIN")
        elif name == "USR2":
            self._rolling_restart()
        else:
            log.info("swarm: ignored signal %s", name)

    def message(self, pid: int, message: Message) -> None:
        """Act on a status line from child ``pid``."""
        child = self.children.get(pid)
        if child is None:
            return
        if message.kind == "ready":
            child.ready = True
        elif message.kind == "jobs":
            child.jobs = message.count
        elif message.kind == "retiring" and child.retiring is None:
            log.warning("worker %d (pid %d) is retiring: %s", child.slot, pid, message.reason)
            child.retiring = message.reason
            child.term_at = self.clock()
            self._start_due(self.clock(), replace=child.slot)

    def exited(self, pid: int, code: int) -> None:
        """Act on a reaped process.

        Args:
            pid: the process reaped by ``waitpid`` (as PID 1, possibly not one of ours).
            code: its exit code, or minus the signal number that killed it.
        """
        child = self.children.pop(pid)
        if child is None:
            log.debug("reaped pid %d, not a worker of this swarm", pid)
            return
        now = self.clock()
        how = f"exited with {code}" if code >= 0 else f"was killed by signal {-code}"
        if code == EXIT_RETIRED and child.retiring is None:
            child.retiring = "retired itself"
        if child.retiring is not None or self.stopping:
            log.info("worker %d (pid %d) %s (%s)", child.slot, pid, how, child.retiring or "stop")
        else:
            log.warning("worker %d (pid %d) %s unexpectedly", child.slot, pid, how)
        if not (self.stopping or self.quiet) and child.slot not in self._restarts:
            delay = 0.0 if child.retiring is not None else self.backoff.delay(child, now)
            if delay:
                log.warning("worker %d keeps dying at start: next try in %.0f s", child.slot, delay)
            self._restarts[child.slot] = now + delay
            self._start_due(now)
        if self.recover is not None and code not in (0, EXIT_RETIRED):
            try:
                self.recover(child.identity)
            except Exception:  # orphan recovery gets them later
                log.exception("could not recover the private lists of %s now", child.identity)

    def tick(self) -> None:
        """Do what is due: restarts, kills of children that outlived their TERM, planned
        replacements, the memory and job-count checks."""
        now = self.clock()
        self._kill_stragglers(now)
        if self.stopping or self.quiet:
            return
        self._start_due(now)
        if self._replacement_in_flight():
            return
        while self._rolling:
            child = self.children.get(self._rolling.pop(0))
            if child is not None and child.retiring is None:
                self._replace(child, "rolling restart", now)
                return
        if now >= self._next_recycle_check:
            self._next_recycle_check = now + RECYCLE_CHECK
            self._recycle(now)

    # -- what the runtime reads ------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Stopping, and every child has exited."""
        return self.stopping and len(self.children) == 0

    @property
    def exit_code(self) -> int:
        """0 when every child stopped by itself; 1 when some had to be killed."""
        return 1 if self.killed else 0

    def next_wait(self) -> float:
        """Seconds until :meth:`tick` has something to do (at most 1)."""
        now = self.clock()
        due = [t - now for t in self._restarts.values()]
        return max(0.0, min([1.0, *due]))

    def title(self) -> str:
        """The parent's process title: ``rfetch <version> swarm [N children]``."""
        tag = f" {self.config.tag}" if self.config.tag else ""
        state = ""
        if self.stopping:
            state = " stopping"
        elif self.quiet:
            state = " quiet"
        elif self._rolling or self._replacing is not None:
            state = " replacing"
        return f"rfetch {__version__}{tag} swarm [{len(self.children)} children]{state}"

    # -- rules -----------------------------------------------------------------------------

    def _spawn(self, slot: int, now: float) -> None:
        try:
            pid, identity = self.processes.spawn(slot)
        except OSError as exc:
            log.error("could not fork worker %d: %s; trying again", slot, exc)
            self._restarts[slot] = now + FORK_RETRY
            return
        self.children.add(Child(slot, pid, identity, now))
        log.info("worker %d started: pid %d, identity %s", slot, pid, identity)

    def _start_due(self, now: float, replace: int | None = None) -> None:
        """Fork the children whose restart is due, and ``replace``'s slot now."""
        if self.stopping or self.quiet:
            return
        if replace is not None:
            self._restarts[replace] = now
        for slot, due in sorted(self._restarts.items()):
            if due <= now:
                del self._restarts[slot]
                if self.children.active(slot) is None:
                    self._spawn(slot, now)

    def _replace(self, child: Child, reason: str, now: float) -> None:
        """A planned replacement (a recycle): USR1 to the old child (quiet, finish the
        running jobs with no deadline, exit 0), and fork the new one now."""
        log.info("replacing worker %d (pid %d): %s; its running jobs finish first",
                 child.slot, child.pid, reason)
        child.retiring = reason
        self.processes.send(child.pid, "USR1")
        self._replacing = child.slot
        self._spawn(child.slot, now)

    def _replacement_in_flight(self) -> bool:
        """Whether the last planned replacement's new child has yet to say ``ready`` (the
        old one may still be finishing its jobs: that can take as long as they do)."""
        slot = self._replacing
        if slot is None:
            return False
        active = self.children.active(slot)
        if active is None or not active.ready:
            return True
        self._replacing = None
        return False

    def _recycle(self, now: float) -> None:
        max_memory, max_jobs = self.config.max_memory, self.config.max_jobs
        if max_memory is None and max_jobs is None:
            return
        for child in self.children:
            if not child.working:
                continue
            rss = self.processes.rss_mb(child.pid) if max_memory is not None else None
            reason = recycle_reason(child, rss, max_memory, max_jobs)
            if reason is not None:
                self._replace(child, reason, now)
                return

    def _quiet_down(self) -> None:
        if self.quiet or self.stopping:
            return
        log.info("swarm quiet: every worker stops fetching; none is started or replaced")
        self.quiet = True
        self._restarts.clear()
        self._rolling.clear()
        for child in self.children:
            self.processes.send(child.pid, "TSTP")

    def _stop(self, name: str) -> None:
        now = self.clock()
        if self.stopping:
            log.info("second %s: every worker stops now", name)
            for child in self.children:
                self.processes.send(child.pid, "TERM")
            return
        log.info("swarm stopping: %d worker(s) push back after -t", len(self.children))
        self.stopping = True
        self._restarts.clear()
        self._rolling.clear()
        for child in self.children:
            if child.term_at is None:
                self._term(child, now)

    def _term(self, child: Child, now: float) -> None:
        child.term_at = now
        self.processes.send(child.pid, "TERM")

    def _kill_stragglers(self, now: float) -> None:
        for child in self.children:
            if child.term_at is not None and not child.killed and (
                now >= child.term_at + self._stop_grace
            ):
                log.error(
                    "worker %d (pid %d) still alive %.0f s after TERM: killing it",
                    child.slot, child.pid, now - child.term_at,
                )
                child.killed = True
                self.killed += 1
                self.processes.send(child.pid, "KILL")

    def _rolling_restart(self) -> None:
        if self.quiet or self.stopping:
            log.info("USR2 ignored: the swarm is %s", "stopping" if self.stopping else "quiet")
            return
        if self._rolling:
            log.info("USR2 ignored: a rolling restart is under way")
            return
        active = sorted((c for c in self.children if c.retiring is None), key=lambda c: c.slot)
        self._rolling = [c.pid for c in active]
        log.info("rolling restart of %d worker(s), one at a time", len(self._rolling))
        self.tick()
