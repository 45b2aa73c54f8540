"""The tables ``benchmarks.compare`` prints: one row per framework and logging setting, the
rfetch / peer ratios within each logging setting, the command breakdowns, the load average
around every run."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Result:
    """Everything measured for one framework under one logging setting; each list of runs
    holds one dict per run, with the load average before and after it."""

    key: str
    label: str
    fetch: str
    version: str
    logging: str
    multi_queue: bool = True
    drain: list[dict[str, Any]] = field(default_factory=list)
    sleep: list[dict[str, Any]] = field(default_factory=list)
    latency: list[dict[str, Any]] = field(default_factory=list)
    idle: dict[str, dict[str, Any]] = field(default_factory=dict)
    rtt: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def median(self, runs: list[dict[str, Any]], name: str) -> float | None:
        values = [r[name] for r in runs if r.get(name) is not None]
        return float(statistics.median(values)) if values else None

    def exact(self, runs: list[dict[str, Any]]) -> bool:
        return all(r.get("exact", True) for r in runs)

    def latencies(self) -> list[float]:
        """Every round's latencies (seconds), pooled."""
        return [x for run in self.latency for x in run["latencies"]]

    def runs(self) -> list[dict[str, Any]]:
        """Every run, in the order they ran."""
        every = [*self.drain, *self.sleep, *self.latency, *self.idle.values()]
        if self.rtt:
            every.append(self.rtt)
        return sorted(every, key=lambda r: r.get("seq", 0))


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def fmt_rate(value: float | None, exact: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}{'' if exact else '*'}"


def figures(res: Result) -> dict[str, float | None]:
    lat = res.latencies()
    return {
        "steady": res.median(res.drain, "steady"),
        "sleep": res.median(res.sleep, "steady"),
        "bulk": res.median(res.drain, "bulk"),
        "p50": percentile(lat, 0.5) * 1000 if lat else None,
        "p99": percentile(lat, 0.99) * 1000 if lat else None,
        "idle1": res.idle.get("1", {}).get("per_second"),
        "idle20": res.idle.get("20", {}).get("per_second"),
        "top1": res.idle.get("1", {}).get("top_per_second"),
        "top20": res.idle.get("20", {}).get("top_per_second"),
        "cmds": res.median(res.drain, "cmds_per_job"),
        "rss": max((r["rss_mb"] for r in res.drain), default=None),
    }


def header(opts: dict[str, Any]) -> list[str]:
    low, high = opts["window"]
    lines = [
        f"{opts['jobs']:,} jobs, 1 worker process, -c 10 (sleep: -c 50), median of "
        f"{opts['runs']} interleaved round(s) (every framework once per round, the order "
        f"rotated each round); steady = jobs/s from {low:.0%} to {high:.0%} done; * = drain "
        f"cut at {opts['max_drain']:.0f} s, rate to the cut",
        f"latency: {opts['latency_count']} single pushes into an idle worker (spread over the "
        f"rounds, pooled), each after an idle gap of {opts['gap_min']:g}-{opts['gap_max']:g} s",
        f"logging: {', '.join(opts['logging'])} (default = each framework's own default level; "
        "quiet = every framework's per-job lines off; idle and rtt run under the first)",
    ]
    lines += ["per-job log lines at each framework's default level:",
              *(f"  {text}" for text in opts["per_job"])]
    if opts["pin"]:
        lines.append(f"every worker run under taskset -c {opts['pin']}")
    return lines


def pair(a: float | None, b: float | None, many: str) -> str:
    return ("-" if a is None else f"{a:.2f}") + " / " + (many if b is None else f"{b:.2f}")


def cells(res: Result) -> dict[str, str]:
    """The main table's cells of one row, by column title."""
    f = figures(res)
    many = "-" if res.multi_queue else "n/a"
    return {
        "steady jobs/s": fmt_rate(f["steady"], res.exact(res.drain)),
        "1 ms sleep jobs/s (-c 50)": fmt_rate(f["sleep"], res.exact(res.sleep)),
        "bulk enqueue jobs/s": fmt_rate(f["bulk"]),
        "latency p50 / p99 ms": "-" if f["p50"] is None or f["p99"] is None
        else f"{f['p50']:.2f} / {f['p99']:.2f}",
        "idle cmds/s 1 q / 20 q": pair(f["idle1"], f["idle20"], many),
        "idle top-level calls/s 1 q / 20 q": pair(f["top1"], f["top20"], many),
        "Redis cmds/job": "-" if f["cmds"] is None else f"{f['cmds']:.2f}",
        "worker RSS MB": "-" if f["rss"] is None else f"{f['rss']:.1f}",
    }


# Column title -> the workload that fills it (a column whose workload did not run is left out).
COLUMNS = {"steady jobs/s": "drain", "1 ms sleep jobs/s (-c 50)": "sleep",
           "bulk enqueue jobs/s": "drain", "latency p50 / p99 ms": "latency",
           "idle cmds/s 1 q / 20 q": "idle", "idle top-level calls/s 1 q / 20 q": "idle",
           "Redis cmds/job": "drain", "worker RSS MB": "drain"}
RATIOS = {"steady": ("drain", "steady"), "1 ms sleep": ("sleep", "sleep"),
          "bulk enqueue": ("drain", "bulk"), "latency p50": ("latency", "p50"),
          "latency p99": ("latency", "p99"), "idle 1 q": ("idle", "idle1"),
          "worker RSS": ("drain", "rss")}


def main_rows(results: list[Result], workloads: set[str]) -> list[str]:
    titles = [t for t, workload in COLUMNS.items() if workload in workloads]
    lines = [f"| framework | logging | fetch | {' | '.join(titles)} |",
             "|---" * (len(titles) + 3) + "|"]
    for res in results:
        row = cells(res)
        lines.append(f"| {res.label} | {res.logging} | {res.fetch} | "
                     f"{' | '.join(row[t] for t in titles)} |")
    return lines


def ratio_rows(results: list[Result], workloads: set[str]) -> list[str]:
    """rfetch (the default install) / every other row of the same logging setting."""
    titles = [t for t, (workload, _) in RATIOS.items() if workload in workloads]
    lines: list[str] = []
    for base in (r for r in results if r.key == "rfetch"):
        others = [r for r in results if r.logging == base.logging and r is not base]
        if not others or not titles:
            continue
        mine = figures(base)
        lines += [
            "",
            f"rfetch / peer, {base.logging} logging (throughput: above 1 is rfetch faster; "
            "latency, idle cost, RSS: below 1 is rfetch better)",
            "",
            f"| peer | {' | '.join(titles)} |",
            "|---" * (len(titles) + 1) + "|",
        ]
        for res in others:
            theirs = figures(res)
            row = [ratio(mine[RATIOS[t][1]], theirs[RATIOS[t][1]]) for t in titles]
            lines.append(f"| {res.label} | {' | '.join(row)} |")
    return lines


def ratio(mine: float | None, theirs: float | None) -> str:
    if mine is None or not theirs:
        return "-"
    return f"{mine / theirs:.2f}x" if mine / theirs >= 0.1 else f"{mine / theirs:.3f}x"


def per_job(counts: dict[str, int], done: int) -> str:
    return ", ".join(f"{k} {v / max(done, 1):.3f}" for k, v in counts.items()
                     if v / max(done, 1) >= 0.001)


def rtt_lines(results: list[Result]) -> list[str]:
    lines: list[str] = []
    for res in results:
        if not res.rtt.get("monitor"):
            continue
        m, done = res.rtt["monitor"], res.rtt["done"]
        lines += [
            "",
            f"{res.label}: Redis commands per job under load (MONITOR, {done:,} jobs, the "
            "jobs' own INCRBY and the harness left out):",
            f"  total {m['top_per_job'] + m['lua_per_job']:.3f} = top-level calls "
            f"{m['top_per_job']:.3f} + inside Lua {m['lua_per_job']:.3f}; INFO "
            f"commandstats (counts both) {res.rtt['cmds_per_job']:.3f}",
            f"  top-level per job: {per_job(m['top'], done) or '-'}",
            f"  inside Lua per job: {per_job(m['lua'], done) or '-'}",
        ]
    return lines


def idle_lines(results: list[Result]) -> list[str]:
    idles = [(res, name, idle) for res in results for name, idle in sorted(res.idle.items())]
    lines = ["", "Idle cost (commands/s; commandstats counts calls made inside Lua too):"]
    for res, name, idle in idles:
        secs = idle["seconds"]
        top = ", ".join(f"{k} {v / secs:.2f}" for k, v in idle["top"].items())
        lua = ", ".join(f"{k} {v / secs:.2f}" for k, v in idle["lua"].items())
        lines.append(f"  {res.label}, {name} queue(s): total {idle['per_second']:.2f}; "
                     f"top-level {idle['top_per_second']:.2f} ({top or 'none'}); "
                     f"in Lua {idle['lua_per_second']:.2f} ({lua or 'none'})")
    return lines if idles else []


def load_lines(results: list[Result], start: list[float], end: list[float]) -> list[str]:
    """The footer: the 1-minute load average before -> after each run, in run order."""
    lines = ["", f"Load average (/proc/loadavg, 1 min) at the start {start[0]:.2f}, at the "
             f"end {end[0]:.2f}; before -> after each run:"]
    for res in results:
        runs = ", ".join(f"{r['what']} {r['load_before'][0]:.2f}->{r['load_after'][0]:.2f}"
                         for r in res.runs() if "load_before" in r)
        lines.append(f"  {res.label} [{res.logging}]: {runs or '-'}")
    return lines


def table(results: list[Result], opts: dict[str, Any]) -> str:
    workloads = opts["workloads"]
    lines = [*header(opts), "", *main_rows(results, workloads),
             *ratio_rows(results, workloads),
             *rtt_lines(results), *idle_lines(results),
             *load_lines(results, opts["load_start"], opts["load_end"])]
    lines += [f"{res.label} [{res.logging}]: FAILED {error}"
              for res in results for error in res.errors]
    return "\n".join(lines)
