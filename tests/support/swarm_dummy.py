"""A swarm of dummy children, for the supervisor's process tests without Redis.

``python -m tests.support.swarm_dummy EVIDENCE_DIR PROCESSES [-t SECONDS] [--subreaper]``
runs :func:`rfetch.swarm.runtime.run_swarm` with children that only say ``ready`` and
append ``<event> <slot> <pid> [<extra>]`` lines (``start``, ``tstp``, ``ttin``, ``usr1``,
``term``, ``exit``, ``grandchild``) to ``EVIDENCE_DIR/events`` with ``O_APPEND``: evidence kept
outside the processes under test. A child whose slot file ``EVIDENCE_DIR/grandchild-<slot>``
exists starts a ``sleep 1`` grandchild first (it is deleted, so only one child does).
``--subreaper`` makes the parent the reaper of orphaned descendants (Linux's
``PR_SET_CHILD_SUBREAPER``), the way PID 1 is in a container.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rfetch.config import Config
from rfetch.swarm.runtime import ChildSpec, run_swarm

PR_SET_CHILD_SUBREAPER = 36


def _record(evidence: Path, event: str, spec: ChildSpec, extra: str = "") -> None:
    line = f"{event} {spec.slot} {os.getpid()} {extra}".rstrip() + "\n"
    fd = os.open(evidence / "events", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def dummy_child(evidence: Path, spec: ChildSpec) -> int:
    """A child: records its signals; TERM or USR1 (a recycle) ends it with 0."""
    stop: list[str] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append("term"))
    signal.signal(signal.SIGUSR1, lambda *_: stop.append("usr1"))
    signal.signal(signal.SIGTSTP, lambda *_: _record(evidence, "tstp", spec))
    signal.signal(signal.SIGTTIN, lambda *_: _record(evidence, "ttin", spec))
    _record(evidence, "start", spec, spec.identity)
    marker = evidence / f"grandchild-{spec.slot}"
    if marker.exists():
        marker.unlink()
        grandchild = subprocess.Popen(["sleep", "1"])
        _record(evidence, "grandchild", spec, str(grandchild.pid))
    spec.status.ready()
    while not stop and os.getppid() == spec.parent_pid:
        time.sleep(0.02)
    _record(evidence, stop[0] if stop else "orphaned", spec)
    _record(evidence, "exit", spec)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("evidence", type=Path)
    parser.add_argument("processes", type=int)
    parser.add_argument("-t", type=float, default=5.0)
    parser.add_argument("--subreaper", action="store_true")
    args = parser.parse_args()
    if args.subreaper:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            print("prctl(PR_SET_CHILD_SUBREAPER) failed", file=sys.stderr)
            return 2
    config = Config(processes=args.processes, shutdown_timeout=args.t)
    return run_swarm(config, lambda spec: dummy_child(args.evidence, spec))


if __name__ == "__main__":
    sys.exit(main())
