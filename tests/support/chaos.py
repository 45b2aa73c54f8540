"""The machinery of the chaos suite, shared with ``contrib/chaos/run_full.py``.

A chaos run starts real ``rfetch worker`` subprocesses (``-r chaos_jobs``) against a Redis
server the run owns, pushes jobs, kills workers with SIGKILL and starts replacements, kills
and restarts Redis, and then counts from the jobs' own evidence (append-only files written
outside Redis, see ``tests/jobs/chaos_jobs.py``) how many pushed jobs never finished (lost)
and how many ran more than once. Only processes the run started are ever signalled, each by
its own PID.
"""

from __future__ import annotations

import calendar
import random
import re
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import redis

from rfetch.config import Config
from rfetch.push.client import Client
from tests.support.redis_server import RedisServer
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess

REAPED = re.compile(
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z .*reaped dead process "
    r"(\S+?):(\d+):([0-9a-f]+): (\d+) job",
    re.MULTILINE,
)


# -- evidence ---------------------------------------------------------------------------


class Evidence:
    """What the jobs recorded: ``start`` and ``done`` lines per jid, read incrementally
    from every ``<pid>.log`` file of a folder."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.starts: Counter[str] = Counter()
        self.dones: Counter[str] = Counter()
        self.done_pids: dict[str, list[int]] = defaultdict(list)
        self.done_times: dict[str, list[float]] = defaultdict(list)
        self.start_pids: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.extra: dict[str, str] = {}
        self._offsets: dict[Path, int] = {}

    def poll(self) -> Evidence:
        """Read the lines written since the last call (whole lines only)."""
        for path in sorted(self.directory.glob("*.log")):
            offset = self._offsets.get(path, 0)
            with path.open("rb") as handle:
                handle.seek(offset)
                data = handle.read()
            end = data.rfind(b"\n") + 1
            self._offsets[path] = offset + end
            for line in data[:end].decode().splitlines():
                parts = line.split(" ", 4)
                event, jid, pid = parts[0], parts[1], int(parts[2])
                if event == "start":
                    self.starts[jid] += 1
                    self.start_pids[jid].append((float(parts[3]), pid))
                elif event == "done":
                    self.dones[jid] += 1
                    self.done_pids[jid].append(pid)
                    self.done_times[jid].append(float(parts[3]))
                    if len(parts) > 4 and parts[4]:
                        self.extra[jid] = parts[4]
        return self

    def lost(self, jids: Iterable[str]) -> list[str]:
        """Jids with no ``done`` record."""
        return [jid for jid in jids if self.dones[jid] == 0]

    def duplicates(self) -> int:
        """Runs that finished beyond the first, over all jids."""
        return sum(n - 1 for n in self.dones.values() if n > 1)

    def duplicated(self) -> dict[str, float]:
        """Each jid that finished more than once, with the time (epoch seconds, the jobs'
        clock) its first run finished."""
        return {jid: min(self.done_times[jid]) for jid, n in self.dones.items() if n > 1}

    def reruns(self) -> int:
        """Runs that started beyond the first (a job killed mid-run and run again counts)."""
        return sum(n - 1 for n in self.starts.values() if n > 1)

    def unexplained_reruns(self, killed: Iterable[int]) -> list[str]:
        """Jids run again although the process of an earlier run was not SIGKILLed.

        A job runs a second time legitimately only when the process that held it died
        (its private list is recovered); any other re-run is a duplicate rfetch caused.
        """
        dead = set(killed)
        return [
            jid
            for jid, runs in self.start_pids.items()
            if len(runs) > 1 and any(pid not in dead for _, pid in sorted(runs)[:-1])
        ]


def leftovers(client: redis.Redis) -> dict[str, int]:
    """Keys that must be empty after a run, with their sizes: every ``queue:*`` key (public
    queues and the ``queue:sq|*`` private lists, found by SCAN), ``schedule``, ``retry``
    and ``dead``."""
    found: dict[str, int] = {}
    for key in client.scan_iter(match="queue:*", count=1000):
        name = key.decode()
        kind = client.type(key).decode()
        found[name] = int(client.llen(key)) if kind == "list" else -1
    for name in ("schedule", "retry", "dead"):
        if client.zcard(name):
            found[name] = int(client.zcard(name))
    return found


def registry_leftovers(client: redis.Redis) -> list[str]:
    """Processes still registered after every worker stopped or was reaped: members of
    ``processes``, ``rfetch:identities`` and ``rfetch:suspects``."""
    found = [f"processes[{m.decode()}]" for m in client.smembers("processes")]
    for name in ("rfetch:identities", "rfetch:suspects"):
        found += [f"{name}[{m.decode()}]" for m in client.hkeys(name)]
    return sorted(found)


def private_lists(client: redis.Redis) -> dict[str, int]:
    """Every private list (``queue:sq|*``, by SCAN) with its length."""
    return {
        key.decode(): int(client.llen(key))
        for key in client.scan_iter(match="queue:sq|*", count=1000)
    }


def parse_stamp(date: str, millis: str) -> float:
    """Epoch seconds of a worker log timestamp (UTC, millisecond precision)."""
    return calendar.timegm(time.strptime(date, "%Y-%m-%dT%H:%M:%S")) + int(millis) / 1000


# -- workers ----------------------------------------------------------------------------


@dataclass
class Fleet:
    """The worker processes of one run, started with the same arguments.

    Attributes:
        redis_url: the run's Redis.
        log_dir: where each worker's log file goes.
        evidence_dir: ``RFETCH_CHAOS_DIR`` of the workers.
        args: ``rfetch worker`` arguments after ``-r chaos_jobs``.
        env: extra environment (``RFETCH_*`` settings).
    """

    redis_url: str
    log_dir: Path
    evidence_dir: Path
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    live: list[WorkerProcess] = field(default_factory=list)
    gone: list[WorkerProcess] = field(default_factory=list)
    kills: list[tuple[int, float]] = field(default_factory=list)
    unexpected_exits: list[tuple[int, int | None]] = field(default_factory=list)

    def start(self) -> WorkerProcess:
        proc = WorkerProcess(
            self.redis_url,
            ["-r", "chaos_jobs", *self.args],
            env={**FAST_ENV, **self.env, "RFETCH_CHAOS_DIR": str(self.evidence_dir)},
            log_dir=self.log_dir,
        )
        self.live.append(proc)
        return proc

    def kill(self, proc: WorkerProcess) -> None:
        """SIGKILL one of our workers (recording when) and forget it."""
        self.live.remove(proc)
        self.kills.append((proc.pid, time.time()))
        proc.kill()
        self.gone.append(proc)

    def kill_random(self, rng: random.Random) -> WorkerProcess:
        proc = rng.choice(self.live)
        self.kill(proc)
        return proc

    def reap_exited(self) -> list[WorkerProcess]:
        """Workers that exited on their own; they are recorded and forgotten."""
        exited = [p for p in self.live if p.proc.poll() is not None]
        for proc in exited:
            self.live.remove(proc)
            self.gone.append(proc)
            self.unexpected_exits.append((proc.pid, proc.proc.returncode))
        return exited

    def signal(self, proc: WorkerProcess, sig: signal.Signals) -> None:
        proc.signal(sig)

    def stop(self, proc: WorkerProcess, timeout: float = 20.0) -> int:
        """TERM one worker, once it handles signals, and wait for it; its exit code."""
        self.live.remove(proc)
        proc.wait_started()
        proc.signal(signal.SIGTERM)
        code = proc.wait(timeout)
        self.gone.append(proc)
        return code

    def stop_all(self, timeout: float = 20.0) -> list[int]:
        """TERM every live worker at once (each once it handles signals), then wait; their
        exit codes."""
        procs = list(self.live)
        for proc in procs:
            proc.wait_started()
        for proc in procs:
            proc.signal(signal.SIGTERM)
        codes = []
        for proc in procs:
            codes.append(proc.wait(timeout))
            self.live.remove(proc)
            self.gone.append(proc)
        return codes

    def kill_all(self) -> None:
        """Clean-up after a failure: SIGKILL whatever of ours still runs."""
        for proc in list(self.live):
            if proc.proc.poll() is None:
                proc.kill()
        self.gone.extend(self.live)
        self.live.clear()

    def all(self) -> list[WorkerProcess]:
        return [*self.gone, *self.live]

    def logs(self) -> str:
        return "\n".join(p.log() for p in self.all())

    def reaped(self) -> dict[int, tuple[float, int]]:
        """pid -> (time reaped, jobs pushed back), from every worker's ``reaped`` lines."""
        found: dict[int, tuple[float, int]] = {}
        for proc in self.all():
            for match in REAPED.finditer(proc.log()):
                pid = int(match.group(4))
                found.setdefault(pid, (parse_stamp(match.group(1), match.group(2)),
                                       int(match.group(6))))
        return found

    def recovery_times(self) -> list[tuple[int, float, int] | tuple[int, None, None]]:
        """For each kill: (pid, seconds from SIGKILL to the reap, jobs pushed back), or
        (pid, None, None) when the killed process was never reaped (it had not beaten)."""
        reaped = self.reaped()
        out: list[tuple[int, float, int] | tuple[int, None, None]] = []
        for pid, killed_at in self.kills:
            if pid in reaped:
                at, jobs = reaped[pid]
                out.append((pid, at - killed_at, jobs))
            else:
                out.append((pid, None, None))
        return out


# -- the kill -9 run (CI tier and full tier) ---------------------------------------------


@dataclass
class ChaosPlan:
    """One run's size and faults.

    Attributes:
        jobs: how many ``chaos_jobs.Work`` jobs to push.
        workers: worker processes kept alive (each kill starts a replacement).
        concurrency: ``-c`` of each worker.
        prefetch: ``--prefetch`` (None: rfetch's default, equal to concurrency).
        max_ms: a job sleeps a random 0..max_ms milliseconds...
        long_share: ...except this share of the jobs, which sleeps long_ms (a range), so
            that every kill finds jobs running as well as jobs prefetched and jobs finished
            but not yet acknowledged.
        long_ms: the range of the long jobs, milliseconds.
        push_seconds: push the jobs evenly over this many seconds (0: all at once).
        kill_every: average seconds between SIGKILLs of a random worker (each wait is
            drawn from [0.75x, 1.25x], so kills fall at any phase of the fetch cycle;
            0: no kills).
        kill_while: ``"pushing"`` (stop killing once everything is pushed) or ``"running"``
            (kill until every job has finished).
        kill_redis: SIGKILL Redis once, when half of the jobs have finished, and restart it
            on the same port (its AOF with ``appendfsync always`` keeps every write).
        redis_down: seconds Redis stays down.
        drain_timeout: seconds allowed after the last push for everything to finish.
        poison_max_recoveries: the workers' ``RFETCH_POISON_MAX_RECOVERIES``. With a kill
            every 2 s, an innocent job is now and then held by three killed processes in a
            row (seen about once per 5,000-job run at the default of 3) and is buried as a
            poison pill, as designed; the kill tiers raise the limit so that they measure
            loss and duplicates, and ``test_poison.py`` tests the pill rule itself.
        seed: for the job lengths and the choice of victims.
    """

    jobs: int = 5000
    workers: int = 3
    concurrency: int = 5
    prefetch: int | None = None
    max_ms: float = 5.0
    long_share: float = 0.1
    long_ms: tuple[float, float] = (200.0, 800.0)
    push_seconds: float = 0.0
    kill_every: float = 2.0
    kill_while: str = "running"
    kill_redis: bool = True
    redis_down: float = 1.0
    drain_timeout: float = 120.0
    poison_max_recoveries: int = 100
    seed: int = 0

    @property
    def capacity(self) -> int:
        """Jobs one process holds at most: running plus prefetched (concurrency + prefetch)."""
        return self.concurrency + (self.concurrency if self.prefetch is None else self.prefetch)


@dataclass
class ChaosResult:
    """What a run observed."""

    plan: ChaosPlan
    jids: list[str]
    evidence: Evidence
    kills: list[tuple[int, float]]
    redis_killed_at: float | None
    recovery: list[tuple[int, float, int] | tuple[int, None, None]]
    leftovers: dict[str, int]
    registry: list[str]
    exit_codes: list[int]
    unexpected_exits: list[tuple[int, int | None]]
    drained: bool
    elapsed: float

    @property
    def lost(self) -> list[str]:
        return self.evidence.lost(self.jids)

    @property
    def duplicate_bound(self) -> int:
        """Jobs in flight at the kills: each SIGKILLed process held at most
        concurrency + prefetch jobs, and only those can run a second time."""
        return len(self.kills) * self.plan.capacity

    def summary(self) -> str:
        times = [t for _, t, _ in self.recovery if t is not None]
        pushed_back = sum(n for _, _, n in self.recovery if n is not None)
        lines = [
            f"jobs pushed:          {len(self.jids)}",
            f"jobs finished:        {len(self.jids) - len(self.lost)}",
            f"lost:                 {len(self.lost)}",
            f"duplicates (done 2x): {self.evidence.duplicates()}",
            f"re-runs (started 2x): {self.evidence.reruns()}",
            "re-runs whose earlier process was not killed: "
            f"{len(self.evidence.unexplained_reruns(p for p, _ in self.kills))}",
            f"duplicate bound:      {self.duplicate_bound} "
            f"({len(self.kills)} kills x {self.plan.capacity} held per process)",
            f"worker SIGKILLs:      {len(self.kills)}",
            f"Redis SIGKILLed:      {'yes' if self.redis_killed_at else 'no'}",
            f"kills reaped:         {len(times)} of {len(self.kills)}, "
            f"{pushed_back} job(s) pushed back",
        ]
        if times:
            low, mid, high = min(times), sorted(times)[len(times) // 2], max(times)
            lines.append(f"kill -> recovery (s): min {low:.2f}  median {mid:.2f}  max {high:.2f}")
        lines += [
            f"unexpected exits:     {self.unexpected_exits or 'none'}",
            f"exit codes at TERM:   {self.exit_codes}",
            f"keys left over:       {self.leftovers or 'none'}",
            f"processes left registered after TERM: {self.registry or 'none'}",
            f"drained in time:      {self.drained}",
            f"total time:           {self.elapsed:.1f} s",
        ]
        return "\n".join(lines)


def job_ms(plan: ChaosPlan, rng: random.Random) -> float:
    """How long one job of the plan sleeps, milliseconds."""
    if rng.random() < plan.long_share:
        return round(rng.uniform(*plan.long_ms), 2)
    return round(rng.uniform(0, plan.max_ms), 2)


def run_chaos(
    plan: ChaosPlan,
    server: RedisServer,
    workdir: Path,
    say: Callable[[str], None] = lambda text: None,
) -> ChaosResult:
    """Run ``plan`` against ``server`` (which must have AOF on if Redis is killed).

    Args:
        plan: size and faults.
        server: the run's own redis-server; it is SIGKILLed and restarted if the plan says.
        workdir: evidence and worker logs go under it.
        say: progress lines.
    """
    evidence_dir = workdir / "evidence"
    log_dir = workdir / "logs"
    evidence_dir.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(plan.seed)
    args = ["-c", str(plan.concurrency), "-t", "5"]
    if plan.prefetch is not None:
        args += ["--prefetch", str(plan.prefetch)]
    env = {"RFETCH_POISON_MAX_RECOVERIES": str(plan.poison_max_recoveries)}
    fleet = Fleet(server.url, log_dir, evidence_dir, args, env)
    evidence = Evidence(evidence_dir)
    admin = server.client(socket_timeout=5)
    client = Client(Config(redis_url=server.url))
    jids: list[str] = []
    redis_killed_at: float | None = None
    started = time.monotonic()
    try:
        for _ in range(plan.workers):
            fleet.start()
        for proc in fleet.live:
            proc.identity(admin)
        t0 = time.monotonic()
        next_kill = t0 + plan.kill_every
        last_report = t0
        while True:
            now = time.monotonic()
            if len(jids) < plan.jobs:
                if plan.push_seconds <= 0:
                    target = plan.jobs
                else:
                    target = min(plan.jobs, int(plan.jobs * (now - t0) / plan.push_seconds) + 1)
                if target > len(jids):
                    batch = [[job_ms(plan, rng)] for _ in range(target - len(jids))]
                    jids += client.push_bulk("chaos_jobs.Work", batch)
                    if len(jids) == plan.jobs:
                        say(f"all {plan.jobs} jobs pushed after {now - t0:.1f} s")
            evidence.poll()
            finished = len(jids) - len(evidence.lost(jids))
            all_done = len(jids) == plan.jobs and finished == plan.jobs
            if plan.kill_redis and redis_killed_at is None and finished >= plan.jobs // 2:
                say(f"SIGKILL redis-server ({finished} jobs finished)")
                redis_killed_at = time.time()
                server.kill()
                time.sleep(plan.redis_down)
                server.start()
                say("redis-server restarted from its AOF")
            killing = plan.kill_every > 0 and not all_done and (
                plan.kill_while == "running" or len(jids) < plan.jobs
            )
            if killing and now >= next_kill:
                victim = fleet.kill_random(rng)
                fleet.start()
                next_kill = now + plan.kill_every * rng.uniform(0.75, 1.25)
                say(f"SIGKILL worker pid {victim.pid} ({finished} jobs finished)")
            for proc in fleet.reap_exited():
                say(f"worker pid {proc.pid} exited on its own: {proc.proc.returncode}")
                fleet.start()
            if all_done:
                break
            if now - t0 > plan.push_seconds + plan.drain_timeout:
                say("timed out waiting for the jobs to finish")
                break
            if now - last_report >= 5:
                say(f"{finished} finished, {len(jids)} pushed, {len(fleet.kills)} kills")
                last_report = now
            time.sleep(0.05)
        # Every kill's jobs are recovered, every killed process is reaped, nothing is queued.
        live_pids = {str(p.pid) for p in fleet.live}

        def settled() -> bool:
            evidence.poll()
            identities = [k.decode() for k in admin.hkeys("rfetch:identities")]
            return (
                not private_lists(admin)
                and not admin.exists("queue:default")
                and all(i.split(":")[-2] in live_pids for i in identities)
            )

        drained = wait_for(settled, 30, fail=False) and not evidence.lost(jids)
        for proc in fleet.live:  # handlers installed: TERM is a clean stop
            proc.identity(admin)
        exit_codes = fleet.stop_all()
        evidence.poll()
        result = ChaosResult(
            plan=plan,
            jids=jids,
            evidence=evidence,
            kills=fleet.kills,
            redis_killed_at=redis_killed_at,
            recovery=fleet.recovery_times(),
            leftovers=leftovers(admin),
            registry=registry_leftovers(admin),
            exit_codes=exit_codes,
            unexpected_exits=fleet.unexpected_exits,
            drained=drained,
            elapsed=time.monotonic() - started,
        )
    finally:
        fleet.kill_all()
        admin.close()
    return result
