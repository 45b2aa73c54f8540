"""Check order and overlap per ordering key from the evidence the jobs wrote (ordering keys).

Used by the real-process tests (``tests/integration/test_ordering_workers.py``,
``tests/chaos/test_ordering_chaos.py``) and by ``benchmarks/ordering.py``. The evidence is
``tests/jobs/ordered_jobs.py``'s lines ``<event> <jid> <pid> <time> <key> <seq>`` in one
file per process; a run is a ``start`` and the next ``done``/``fail`` of the same jid in the
same process, or, for a process that was SIGKILLed, the kill time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Run:
    """One execution of a job, as the job recorded it (times: float epoch seconds)."""

    jid: str
    key: str
    seq: int
    pid: int
    start: float
    end: float | None = None
    outcome: str = "open"


@dataclass
class OrderReport:
    """What :func:`check_order` found."""

    runs: int = 0
    jobs: int = 0
    lost: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    failed_runs: int = 0
    killed_runs: int = 0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.out_of_order or self.overlaps)

    def summary(self) -> str:
        return (
            f"{self.jobs} jobs, {self.runs} runs ({self.failed_runs} failed, "
            f"{self.killed_runs} cut by SIGKILL): {len(self.lost)} lost, "
            f"{len(self.out_of_order)} keys out of order, {len(self.overlaps)} overlaps"
        )


def read_runs(directory: Path) -> list[Run]:
    """Every run recorded in ``directory/*.log``."""
    runs: list[Run] = []
    for path in sorted(directory.glob("*.log")):
        open_runs: dict[str, Run] = {}
        for line in path.read_text().splitlines():
            parts = line.split(" ")
            if len(parts) < 6 or parts[0] not in ("start", "done", "fail"):
                continue
            event, jid, pid, when, key, seq = parts[:6]
            if event == "start":
                run = Run(jid, key, int(seq), int(pid), float(when))
                open_runs[jid] = run
                runs.append(run)
            elif jid in open_runs:
                run = open_runs.pop(jid)
                run.end, run.outcome = float(when), event
    return runs


def check_order(
    runs: Sequence[Run], pushed: Mapping[str, Sequence[str]], kills: Mapping[int, float]
) -> OrderReport:
    """Check every key: first successful runs in enqueue order, no two runs overlapping.

    Args:
        runs: from :func:`read_runs`.
        pushed: ordering key -> jids in enqueue order.
        kills: pid -> time it was SIGKILLed (epoch s); an open run of a killed process ends
            at its kill, an open run of any other process never ends.
    """
    report = OrderReport(runs=len(runs), jobs=sum(len(j) for j in pushed.values()))
    first_done: dict[str, float] = {}
    by_key: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for run in runs:
        end = run.end
        if run.outcome == "open" and run.pid in kills:
            end = kills[run.pid]
            report.killed_runs += 1
        if run.outcome == "fail":
            report.failed_runs += 1
        if run.outcome == "done" and run.end is not None:
            first_done[run.jid] = min(run.end, first_done.get(run.jid, run.end))
        by_key[run.key].append((run.start, float("inf") if end is None else end, run.jid))
    for key, jids in pushed.items():
        report.lost.extend(j for j in jids if j not in first_done)
        done = sorted((first_done[j], j) for j in jids if j in first_done)
        expected = [j for j in jids if j in first_done]
        if [j for _, j in done] != expected:
            report.out_of_order.append(key)
        intervals = sorted(by_key.get(key, []))
        latest_end, latest_jid = float("-inf"), ""
        for start, end, jid in intervals:
            if start < latest_end:
                report.overlaps.append(f"{key}: {jid} started while {latest_jid} ran")
            if end > latest_end:
                latest_end, latest_jid = end, jid
    return report
