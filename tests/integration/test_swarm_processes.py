"""The swarm's parent with real forks and signals, its children being dummies (no Redis):
restart after SIGKILL, TERM and INT passed on once, TSTP and TTIN fanned out, USR2's
rolling restart, reaping of orphaned descendants (as PID 1 does), the process title."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]


class DummySwarm:
    def __init__(self, evidence: Path, processes: int, *extra: str) -> None:
        self.evidence = evidence
        self.log_path = evidence / "parent.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.swarm_dummy", str(evidence),
             str(processes), *extra],
            cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
        )

    def events(self, kind: str) -> list[list[str]]:
        path = self.evidence / "events"
        if not path.exists():
            return []
        rows = [line.split() for line in path.read_text().splitlines()]
        return [row[1:] for row in rows if row[0] == kind]

    def live(self) -> set[int]:
        """Pids of children started and not exited."""
        started = {int(row[1]) for row in self.events("start")}
        return started - {int(row[1]) for row in self.events("exit")}

    def children(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


MakeSwarm = Callable[..., DummySwarm]


@pytest.fixture
def make_swarm(tmp_path: Path) -> Iterator[Callable[..., DummySwarm]]:
    swarms: list[DummySwarm] = []

    def make(processes: int, *extra: str) -> DummySwarm:
        swarm = DummySwarm(tmp_path, processes, *extra)
        swarms.append(swarm)
        wait_for(lambda: len(swarm.live()) == processes, 20, lambda: swarm.log())
        return swarm

    yield make
    for swarm in swarms:
        for pid in swarm.live():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        swarm.close()


def test_sigkilled_child_is_replaced_and_term_stops_every_child(make_swarm: MakeSwarm) -> None:
    swarm = make_swarm(4)
    victim = sorted(swarm.live())[1]
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: len(swarm.events("start")) == 5, 60, swarm.log)
    replacement = int(swarm.events("start")[-1][1])
    assert swarm.events("start")[-1][0] == "1"  # the same slot
    assert replacement not in (victim,)
    assert "unexpectedly" in swarm.log()
    live = swarm.live() - {victim}
    assert len(live) == 4
    swarm.proc.send_signal(signal.SIGTERM)
    assert swarm.proc.wait(10) == 0
    terms = [int(row[1]) for row in swarm.events("term")]
    assert sorted(terms) == sorted(live)  # each live child got TERM exactly once


def test_tstp_and_ttin_reach_every_child_and_int_is_passed_on_once(make_swarm: MakeSwarm) -> None:
    swarm = make_swarm(2)
    live = swarm.live()
    swarm.proc.send_signal(signal.SIGTTIN)
    wait_for(lambda: len(swarm.events("ttin")) == 2, 60, swarm.log)
    swarm.proc.send_signal(signal.SIGTSTP)
    wait_for(lambda: len(swarm.events("tstp")) == 2, 60, swarm.log)
    assert psutil.Process(swarm.proc.pid).status() != psutil.STATUS_STOPPED
    assert "quiet" in " ".join(psutil.Process(swarm.proc.pid).cmdline())
    swarm.proc.send_signal(signal.SIGINT)
    assert swarm.proc.wait(10) == 0
    assert sorted(int(row[1]) for row in swarm.events("term")) == sorted(live)


def test_usr2_replaces_every_child_one_at_a_time(make_swarm: MakeSwarm) -> None:
    swarm = make_swarm(3)
    old = swarm.live()
    swarm.proc.send_signal(signal.SIGUSR2)
    wait_for(lambda: old.isdisjoint(swarm.live()) and len(swarm.live()) == 3, 20, swarm.log)
    # Each old child was recycled (USR1: finish the running jobs, exit), never sent TSTP or
    # TERM, and the next one only after the previous replacement had started.
    assert {int(r[1]) for r in swarm.events("usr1")} == old
    assert not swarm.events("tstp") and not swarm.events("term")
    order = (swarm.evidence / "events").read_text().splitlines()
    recycles = [i for i, line in enumerate(order) if line.startswith("usr1")]
    starts = [i for i, line in enumerate(order) if line.startswith("start")][3:]
    assert len(recycles) == 3 and len(starts) == 3
    assert recycles[1] > starts[0] and recycles[2] > starts[1]
    swarm.proc.send_signal(signal.SIGTERM)
    assert swarm.proc.wait(10) == 0


def test_orphaned_descendants_are_reaped(
    make_swarm: MakeSwarm, tmp_path: Path
) -> None:
    (tmp_path / "grandchild-0").touch()
    swarm = make_swarm(1, "--subreaper")
    wait_for(lambda: swarm.events("grandchild"), 60, swarm.log)
    grandchild = int(swarm.events("grandchild")[0][2])
    os.kill(int(swarm.events("start")[0][1]), signal.SIGKILL)  # the grandchild is orphaned

    def reparented_or_gone() -> bool:
        try:
            return psutil.Process(grandchild).ppid() == swarm.proc.pid
        except psutil.NoSuchProcess:
            return True

    wait_for(reparented_or_gone, 60, "the grandchild handed to the swarm's parent")

    def gone() -> bool:  # reaped: a zombie would still be listed
        return not psutil.pid_exists(grandchild)

    wait_for(gone, 10, lambda: f"grandchild {grandchild} left a zombie\n{swarm.log()}")
    swarm.proc.send_signal(signal.SIGTERM)
    assert swarm.proc.wait(10) == 0


def test_title_names_the_swarm(make_swarm: MakeSwarm) -> None:
    swarm = make_swarm(2)
    wait_for(
        lambda: "swarm [2 children]" in " ".join(psutil.Process(swarm.proc.pid).cmdline()),
        60,
        swarm.log,
    )
    assert all(c.status() != psutil.STATUS_ZOMBIE for c in swarm.children())
    swarm.proc.send_signal(signal.SIGTERM)
    assert swarm.proc.wait(10) == 0
