"""The swarm supervisor's rules, with a fake process table and a fake clock: restarts and
their backoff, recovery of a dead child's lists, signals, the rolling restart (capacity
never below N-1), memory and job-count recycling, stragglers after TERM."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rfetch.config import Config
from rfetch.swarm.channel import EXIT_RETIRED, Message, StatusReader, parse
from rfetch.swarm.children import Child
from rfetch.swarm.cpus import allowed_cpus, cgroup_quota, parse_processes
from rfetch.swarm.policy import RestartBackoff, recycle_reason
from rfetch.swarm.supervisor import Supervisor


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeProcesses:
    """Records what the supervisor does; pids count up from 100."""

    def __init__(self) -> None:
        self.next_pid = 100
        self.alive: dict[int, int] = {}  # pid -> slot
        self.sent: list[tuple[int, str]] = []
        self.rss: dict[int, float] = {}
        self.fail_forks = 0

    def spawn(self, slot: int) -> tuple[int, str]:
        if self.fail_forks:
            self.fail_forks -= 1
            raise OSError("EAGAIN")
        pid = self.next_pid
        self.next_pid += 1
        self.alive[pid] = slot
        return pid, f"host:{pid}:abc"

    def send(self, pid: int, name: str) -> None:
        self.sent.append((pid, name))

    def rss_mb(self, pid: int) -> float | None:
        return self.rss.get(pid, 50.0)

    def signals_to(self, pid: int) -> list[str]:
        return [name for p, name in self.sent if p == pid]


class Swarm:
    """A supervisor on fakes, with helpers to play the children's part."""

    def __init__(self, **config: object) -> None:
        self.clock = Clock()
        self.procs = FakeProcesses()
        self.recovered: list[str] = []
        self.sup = Supervisor(
            Config(**{"processes": 4, "shutdown_timeout": 5.0, **config}),  # type: ignore[arg-type]
            self.procs,
            recover=self.recovered.append,
            clock=self.clock,
        )
        self.capacity: list[int] = []

    def start(self) -> None:
        self.sup.start()
        self.ready_all()

    def ready_all(self) -> None:
        for child in self.sup.children:
            if not child.ready:
                self.sup.message(child.pid, Message("ready"))
        self.observe()

    def pids(self) -> list[int]:
        return sorted(c.pid for c in self.sup.children)

    def die(self, pid: int, code: int) -> None:
        self.procs.alive.pop(pid, None)
        self.sup.exited(pid, code)
        self.observe()

    def tick(self, seconds: float = 0.0) -> None:
        self.clock.now += seconds
        self.sup.tick()
        self.observe()

    def observe(self) -> None:
        self.capacity.append(self.sup.children.working())


def test_start_forks_one_child_per_slot() -> None:
    swarm = Swarm()
    swarm.start()
    assert sorted(c.slot for c in swarm.sup.children) == [0, 1, 2, 3]
    assert swarm.sup.children.working() == 4
    assert swarm.sup.title().endswith("swarm [4 children]")


def test_a_child_that_dies_is_replaced_at_once_and_its_lists_recovered() -> None:
    swarm = Swarm()
    swarm.start()
    swarm.tick(60)
    dead = swarm.sup.children.active(2)
    assert dead is not None
    swarm.die(dead.pid, -9)
    new = swarm.sup.children.active(2)
    assert new is not None and new.pid != dead.pid  # forked inside exited(): no wait
    assert swarm.recovered == [dead.identity]


def test_children_dying_at_start_back_off() -> None:
    swarm = Swarm(processes=1)
    swarm.sup.start()
    delays = []
    for _ in range(5):
        child = swarm.sup.children.active(0)
        assert child is not None
        swarm.die(child.pid, 1)  # dies before saying ready
        started_at = swarm.clock.now
        while swarm.sup.children.active(0) is None:
            swarm.tick(0.5)
        delays.append(swarm.clock.now - started_at)
    assert delays == [0.0, 1.0, 2.0, 4.0, 8.0]
    # Once a child has run for a while, the next death is replaced at once again.
    swarm.ready_all()
    swarm.tick(60)
    child = swarm.sup.children.active(0)
    assert child is not None
    swarm.die(child.pid, -9)
    assert swarm.sup.children.active(0) is not None


def test_backoff_cap() -> None:
    backoff = RestartBackoff(stable_after=5.0, cap=30.0)
    child = Child(0, 1, "h:1:a", started=0.0)
    delays = [backoff.delay(child, 1.0) for _ in range(10)]
    assert delays[-1] == 30.0 and max(delays) == 30.0
    assert backoff.failures(0) == 10


def test_a_failed_fork_is_tried_again() -> None:
    swarm = Swarm(processes=1)
    swarm.procs.fail_forks = 1
    swarm.sup.start()
    assert len(swarm.sup.children) == 0
    swarm.tick(1.0)
    assert len(swarm.sup.children) == 1


def test_term_passes_on_once_and_finishes_when_all_exit() -> None:
    swarm = Swarm()
    swarm.start()
    swarm.sup.signal("TERM")
    assert all(swarm.procs.signals_to(p) == ["TERM"] for p in swarm.pids())
    swarm.sup.signal("INT")  # the second one: every child stops at once
    assert all(swarm.procs.signals_to(p) == ["TERM", "TERM"] for p in swarm.pids())
    for pid in swarm.pids():
        assert not swarm.sup.finished
        swarm.die(pid, 0)
    assert len(swarm.sup.children) == 0  # none restarted while stopping
    assert swarm.sup.finished and swarm.sup.exit_code == 0


def test_a_child_outliving_its_term_is_killed() -> None:
    swarm = Swarm(shutdown_timeout=5.0, block_timeout=1.0, network_timeout=2.0)
    swarm.start()
    swarm.sup.signal("TERM")
    stuck = swarm.pids()[0]
    for pid in swarm.pids()[1:]:
        swarm.die(pid, 0)
    swarm.tick(5.0 + 1.0 + 2.0 + 4.9)
    assert "KILL" not in swarm.procs.signals_to(stuck)
    swarm.tick(0.2)
    assert swarm.procs.signals_to(stuck) == ["TERM", "KILL"]
    swarm.die(stuck, -9)
    assert swarm.sup.finished and swarm.sup.exit_code == 1
    assert f"host:{stuck}:abc" in swarm.recovered


def test_tstp_quiets_every_child_and_nothing_is_replaced_afterwards() -> None:
    swarm = Swarm()
    swarm.start()
    swarm.sup.signal("TSTP")
    assert all(swarm.procs.signals_to(p) == ["TSTP"] for p in swarm.pids())
    victim = swarm.pids()[0]
    swarm.die(victim, -9)
    swarm.tick(60)
    assert len(swarm.sup.children) == 3
    assert swarm.recovered == [f"host:{victim}:abc"]
    swarm.sup.signal("USR2")
    swarm.tick(1)
    assert not any(c.retiring for c in swarm.sup.children)
    assert swarm.sup.title().endswith(" quiet")


def test_ttin_reaches_every_child() -> None:
    swarm = Swarm(processes=2)
    swarm.start()
    swarm.sup.signal("TTIN")
    assert sorted(name for _, name in swarm.procs.sent) == ["TTIN", "TTIN"]


def test_rolling_restart_replaces_every_child_one_at_a_time() -> None:
    swarm = Swarm()
    swarm.start()
    old = set(swarm.pids())
    swarm.sup.signal("USR2")
    for _ in range(4):
        # One replacement at a time: the next waits for the new child's ``ready``, not for
        # the old child's running jobs (they finish with no deadline).
        assert sum(1 for c in swarm.sup.children if not c.ready) == 1
        swarm.tick(0.5)
        assert sum(1 for c in swarm.sup.children if not c.ready) == 1
        swarm.ready_all()
        swarm.tick(0.5)
    assert old.isdisjoint(c.pid for c in swarm.sup.children if not c.retiring)
    assert all(swarm.procs.signals_to(pid) == ["USR1"] for pid in old)
    assert min(swarm.capacity) == 3  # never below N - 1
    for pid in old:
        swarm.die(pid, 0)  # their jobs finished: nothing pushed back
    assert len(swarm.pids()) == 4 and swarm.sup.children.working() == 4
    assert swarm.recovered == []  # they shut down cleanly: nothing left to recover


def test_a_recycled_child_finishes_its_jobs_with_no_deadline() -> None:
    swarm = Swarm(processes=2, max_memory=300)
    swarm.start()
    fat = swarm.pids()[1]
    swarm.procs.rss[fat] = 310.0
    swarm.tick(1.0)
    swarm.ready_all()
    swarm.tick(3600.0)  # a job of an hour: not TERMed, not killed
    assert swarm.procs.signals_to(fat) == ["USR1"]
    assert swarm.sup.exit_code == 0
    swarm.die(fat, 0)
    assert len(swarm.sup.children) == 2 and swarm.recovered == []


def test_term_during_a_recycle_reaches_the_recycled_child_once() -> None:
    swarm = Swarm(processes=2, max_jobs=10)
    swarm.start()
    pid = swarm.pids()[0]
    swarm.sup.message(pid, Message("jobs", count=10))
    swarm.tick(1.0)
    swarm.sup.signal("TERM")  # a deploy: -t, then push back
    assert swarm.procs.signals_to(pid) == ["USR1", "TERM"]
    assert all(swarm.procs.signals_to(p).count("TERM") == 1 for p in swarm.pids())
    swarm.tick(60.0)  # it outlived -t and its shutdown: now it is killed
    assert swarm.procs.signals_to(pid) == ["USR1", "TERM", "KILL"]


def test_a_recycled_child_killed_is_recovered() -> None:
    swarm = Swarm(processes=2, max_memory=300)
    swarm.start()
    fat = swarm.pids()[0]
    swarm.procs.rss[fat] = 310.0
    swarm.tick(1.0)
    swarm.die(fat, -9)  # the OOM killer: its jobs are recovered (poison-pill count)
    assert swarm.recovered == [f"host:{fat}:abc"]
    assert len(swarm.sup.children) == 2


def test_a_second_usr2_during_a_rolling_restart_is_ignored() -> None:
    swarm = Swarm(processes=2)
    swarm.start()
    swarm.sup.signal("USR2")
    swarm.sup.signal("USR2")
    assert sum(1 for c in swarm.sup.children if c.retiring) == 1


def test_memory_recycling_replaces_the_child_past_the_limit() -> None:
    swarm = Swarm(processes=2, max_memory=300)
    swarm.start()
    fat = swarm.pids()[1]
    swarm.procs.rss[fat] = 310.0
    swarm.tick(1.0)
    child = swarm.sup.children.get(fat)
    assert child is not None and child.retiring is not None
    assert child.retiring.startswith("max-memory")
    assert swarm.procs.signals_to(fat) == ["USR1"]
    assert len(swarm.sup.children) == 3  # the fresh child runs already


def test_two_children_past_the_limit_are_recycled_one_after_the_other() -> None:
    swarm = Swarm(processes=2, max_memory=300)
    swarm.start()
    first, second = swarm.pids()
    swarm.procs.rss.update({first: 400.0, second: 400.0})
    swarm.tick(1.0)
    swarm.tick(1.0)
    assert [c.pid for c in swarm.sup.children if c.retiring] == [first]
    swarm.ready_all()  # the next once the first one's replacement is ready
    swarm.tick(1.0)
    retiring = [c.pid for c in swarm.sup.children if c.retiring]
    assert retiring == [first, second]
    assert min(swarm.capacity) >= 1


def test_job_count_recycling() -> None:
    swarm = Swarm(processes=1, max_jobs=1000)
    swarm.start()
    pid = swarm.pids()[0]
    swarm.sup.message(pid, Message("jobs", count=999))
    swarm.tick(1.0)
    assert swarm.procs.signals_to(pid) == []
    swarm.sup.message(pid, Message("jobs", count=1000))
    swarm.tick(1.0)
    assert swarm.procs.signals_to(pid) == ["USR1"]


def test_a_retiring_child_is_replaced_before_it_exits_and_not_sent_term() -> None:
    swarm = Swarm(processes=2)
    swarm.start()
    pid = swarm.pids()[0]
    swarm.sup.message(pid, Message("retiring", reason="job overran its time limit"))
    assert len(swarm.sup.children) == 3
    assert swarm.procs.signals_to(pid) == []
    swarm.die(pid, EXIT_RETIRED)
    assert len(swarm.sup.children) == 2
    assert swarm.recovered == []  # it pushed back what it held before exiting


def test_an_exit_retired_without_a_message_is_replaced_without_backoff() -> None:
    swarm = Swarm(processes=1)
    swarm.sup.start()  # never ready: a death would count as a failure at start
    for _ in range(3):
        swarm.die(swarm.pids()[0], EXIT_RETIRED)
        assert len(swarm.sup.children) == 1


def test_orphans_reaped_as_pid_1_are_ignored() -> None:
    swarm = Swarm(processes=1)
    swarm.start()
    swarm.sup.exited(4242, 0)
    assert swarm.recovered == [] and len(swarm.sup.children) == 1


def test_a_failing_recovery_does_not_stop_the_supervisor() -> None:
    swarm = Swarm(processes=1)

    def broken(identity: str) -> None:
        raise ConnectionError("redis down")

    swarm.sup.recover = broken
    swarm.start()
    swarm.die(swarm.pids()[0], -9)
    assert len(swarm.sup.children) == 1


def test_recycle_reason() -> None:
    child = Child(0, 1, "h:1:a", 0.0, ready=True, jobs=10)
    assert recycle_reason(child, 100.0, None, None) is None
    assert recycle_reason(child, 100.0, 100, None) is None
    assert recycle_reason(child, 100.5, 100, None) == "max-memory (100 MB > 100 MB)"
    assert recycle_reason(child, None, 100, 10) == "max-jobs (10 >= 10)"


def test_status_lines() -> None:
    reader = StatusReader()
    assert list(reader.feed(b"ready\njobs 1")) == [Message("ready")]
    assert list(reader.feed(b"2\nretiring job overran\nnonsense\njobs x\n")) == [
        Message("jobs", count=12),
        Message("retiring", reason="job overran"),
    ]
    assert parse("retiring") == Message("retiring", reason="retiring")


@pytest.mark.parametrize("name", ["HUP", "WINCH"])
def test_other_signals_are_ignored(name: str) -> None:
    swarm = Swarm(processes=1)
    swarm.start()
    swarm.sup.signal(name)
    assert swarm.procs.sent == []


def test_processes_auto_is_capped_by_the_cgroup_quota(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")
    assert cgroup_quota(cpu_max) == 1.5
    assert allowed_cpus(cpu_max) == min(2, len(os.sched_getaffinity(0)))
    cpu_max.write_text("max 100000\n")
    assert allowed_cpus(cpu_max) == len(os.sched_getaffinity(0))
    assert allowed_cpus(tmp_path / "missing") == len(os.sched_getaffinity(0))
    assert parse_processes("AUTO", cpu_max) == len(os.sched_getaffinity(0))
    assert parse_processes("3") == 3
    for bad in ("0", "-2", "two", ""):
        with pytest.raises(ValueError, match="--processes"):
            parse_processes(bad)
