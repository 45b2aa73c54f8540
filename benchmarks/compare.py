"""rfetch against every installed peer, side by side, in one sitting, every framework under
the same conditions (performance).

    benchmarks/setup_peers.sh                    # once: the peers' virtualenv
    python -m benchmarks.compare [--jobs 20000] [--runs 3] [--only rfetch,sidekiq,...]
                                 [--logging default|quiet|both]

What is the same for every framework:

* the install: each Python framework as its plain ``pip install`` gets it (hiredis and orjson
  hidden unless that install brings them: arq's does), so ``rfetch`` is ``pip install
  rfetch`` and ``rfetch-sp`` is ``pip install "rfetch[speedups]"``;
* the logging (``--logging``): ``default`` = each framework's own default level (rfetch,
  Sidekiq, huey, arq and RQ then log per job), ``quiet`` = every framework's per-job lines
  off; ``both`` runs each framework under each setting;
* the rounds: round 1 runs every framework once, round 2 again, ... (the order rotated each
  round), so that a machine whose load drifts weighs on every framework alike; the table
  shows medians, and the load average before and after every run;
* a fresh private redis-server per run, the worker a subprocess in its own process group,
  stopped by that group.

Workloads (``--workloads``):

* ``drain``: N no-op jobs (each one INCRBY of ``bench:done``) enqueued with the framework's
  bulk API (timed: the bulk enqueue figure), then one worker process at -c 10 drains them;
  steady jobs/s between 5 % and 95 % done; peak RSS (VmHWM summed over the worker's process
  tree); Redis commands per job from INFO commandstats.
* ``sleep``: the same with jobs that sleep 1 ms first, at -c 50.
* ``latency``: one job at a time into an idle worker, each after an idle gap of
  ``--gap-min``..``--gap-max`` seconds; enqueue -> start = the start time the job records
  minus the client's time just before the push. The pushes are spread over the rounds.
* ``idle``: Redis commands per second of an idle worker listening to 1 and to 20 queues.
* ``rtt``: rfetch's commands per job under load split into top-level calls and calls made
  inside Lua (MONITOR); ``--rtt-all`` does it for every framework.

idle and rtt run jobs not at all or only to count commands: they run once per framework, in
round 1, under the first logging setting. The harness's own commands (INFO, its polling
GETs, one MULTI) and the jobs' own INCRBYs are taken out of every command count.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click

from benchmarks.common import RESULTS
from benchmarks.compare_table import Result, percentile, table
from benchmarks.harness import Bench, Setting, loadavg
from benchmarks.peers import all_peers
from benchmarks.peers.base import Peer, Runtime

HERE = Path(__file__).resolve().parent
PEERS_PYTHON = HERE / ".venv-peers" / "bin" / "python"
WORKLOADS = ("drain", "sleep", "latency", "idle", "rtt")
LOGGING = {"default": ("default",), "quiet": ("quiet",), "both": ("default", "quiet")}
MANY_QUEUES = [f"q{i:02d}" for i in range(20)]
WINDOW = (0.05, 0.95)
LATENCY_WARMUP = 5  # unmeasured pushes at the start of each round's latency run

__all__ = ["PEERS_PYTHON", "Bench", "Result", "main"]


def say(text: str) -> None:
    click.echo(text, err=True)


@dataclass
class Variant:
    """One framework under one logging setting: what runs it, what it measured."""

    peer: Peer
    bench: Bench
    result: Result


_seq = itertools.count(1)


def measure(v: Variant, what: str, func: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
    """Run one measurement; its figures with the load average before and after it (a
    latency list becomes ``{"latencies": [...]}``), or None when it failed (one framework
    failing must not stop the others: the error goes to the table)."""
    name = f"{v.peer.key} [{v.result.logging}]"
    say(f"  {name}: {what} ...")
    before, started = loadavg(), time.monotonic()
    try:
        value = func(*args)
    except Exception as exc:
        v.result.errors.append(f"{what}: {exc}")
        say(f"  {name}: {what} FAILED: {exc}")
        return None
    out: dict[str, Any] = value if isinstance(value, dict) else {"latencies": value}
    out.update(what=what.split(" (")[0], seq=next(_seq), load_before=before,
               load_after=loadavg())
    say(f"  {name}: {what} done in {time.monotonic() - started:.1f} s: {summary(out)}; "
        f"load {before[0]:.2f} -> {out['load_after'][0]:.2f}")
    return out


def run_round(v: Variant, rnd: int, opts: dict[str, Any]) -> None:
    """Round ``rnd`` of one variant: a drain and a sleep run, its share of the latency
    pushes; in round 1 under the first logging setting, the idle and rtt workloads too."""
    res, bench, workloads = v.result, v.bench, opts["workloads"]
    jobs, runs = opts["jobs"], opts["runs"]
    if "drain" in workloads and (out := measure(
            v, f"drain r{rnd} ({jobs} no-op jobs, -c 10)", bench.drain, "noop", jobs, 10)):
        res.drain.append(out)
    if "sleep" in workloads and (out := measure(
            v, f"sleep r{rnd} ({jobs} 1 ms jobs, -c 50)", bench.drain, "sleep", jobs, 50)):
        res.sleep.append(out)
    if "latency" in workloads:
        count = math.ceil(opts["latency_count"] / runs)
        if out := measure(v, f"latency r{rnd} ({count} single pushes)", bench.latency,
                          count, LATENCY_WARMUP):
            res.latency.append(out)
    if rnd != 1 or res.logging != opts["logging"][0]:
        return
    if "idle" in workloads:
        for queues in (["default"], MANY_QUEUES):
            if len(queues) > 1 and not v.peer.multi_queue:
                say(f"  {v.peer.key}: idle with 20 queues skipped: one queue per worker")
                continue
            if out := measure(v, f"idle {len(queues)}q ({opts['idle_seconds']:.0f} s)",
                              bench.idle, queues, opts["idle_seconds"]):
                res.idle[str(len(queues))] = out
    if "rtt" in workloads and (v.peer.key.startswith("rfetch") or opts["rtt_all"]) and (
            out := measure(v, f"rtt ({jobs} no-op jobs under MONITOR, -c 10)", bench.drain,
                           "noop", jobs, 10, True)):
        res.rtt = out


def run_rounds(variants: list[Variant], opts: dict[str, Any]) -> None:
    """Interleave: every variant once per round, the starting variant moved by one each
    round (round 1 starts with the first, round 2 with the second, ...)."""
    for rnd in range(1, opts["runs"] + 1):
        shift = (rnd - 1) % len(variants)
        order = variants[shift:] + variants[:shift]
        say(f"round {rnd}/{opts['runs']}: "
            + ", ".join(f"{v.peer.key} [{v.result.logging}]" for v in order))
        for v in order:
            run_round(v, rnd, opts)


def summary(value: dict[str, Any]) -> str:
    if "latencies" in value:
        lat = value["latencies"]
        return (f"p50 {percentile(lat, 0.5) * 1000:.2f} ms, "
                f"p99 {percentile(lat, 0.99) * 1000:.2f} ms")
    if "steady" in value:
        text = (f"{value['steady']:.0f} jobs/s{'' if value['exact'] else ' (time-capped)'}, "
                f"bulk {value['bulk']:.0f}/s, RSS {value['rss_mb']:.1f} MB, "
                f"{value['cmds_per_job']:.2f} cmds/job")
        if "monitor" in value:
            m = value["monitor"]
            text += f"; top-level {m['top_per_job']:.2f}/job, in Lua {m['lua_per_job']:.2f}/job"
        return text
    if "per_second" in value:
        top = ", ".join(f"{k} {v}" for k, v in list(value["commands"].items())[:5])
        return (f"{value['per_second']:.2f} cmds/s ({top}); top-level "
                f"{value['top_per_second']:.2f}/s, in Lua {value['lua_per_second']:.2f}/s")
    return str(value)


def select(only: str, rt: Runtime) -> list[tuple[Peer, str]]:
    """The chosen peers that are installed, with their versions.

    Raises:
        click.BadParameter: ``only`` names an unknown framework.
    """
    peers = all_peers()
    keys = [k.strip() for k in only.split(",") if k.strip()]
    unknown = set(keys) - {p.key for p in peers}
    if unknown:
        raise click.BadParameter(f"unknown framework(s) {sorted(unknown)}", param_hint="--only")
    chosen = []
    for peer in (p for p in peers if (p.key in keys if keys else p.default)):
        version = peer.version(rt)
        if version is None:
            say(f"{peer.key}: not installed, skipped")
            continue
        say(f"{peer.key} {version}")
        chosen.append((peer, version))
    return chosen


def variants_of(chosen: list[tuple[Peer, str]], rt: Runtime, logs: Path,
                opts: dict[str, Any]) -> list[Variant]:
    """One variant per framework and logging setting, framework-major."""
    out = []
    for (peer, version), logging in itertools.product(chosen, opts["logging"]):
        setting = Setting(quiet=logging == "quiet", window=opts["window"],
                          gaps=(opts["gap_min"], opts["gap_max"]), pin=opts["pin"])
        res = Result(peer.key, f"{peer.label} {version}", peer.fetch, version, logging,
                     peer.multi_queue)
        out.append(Variant(peer, Bench(peer, rt, logs, opts["max_drain"], setting), res))
    return out


def interpreter(python: str | None) -> str:
    if python is not None:
        return python
    if PEERS_PYTHON.exists():
        return str(PEERS_PYTHON)
    say(f"note: {PEERS_PYTHON} not found (run benchmarks/setup_peers.sh); Python "
        "peers that this interpreter lacks are skipped")
    return sys.executable


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=20_000, show_default=True, help="Jobs per drain.")
@click.option("--runs", default=3, show_default=True,
              help="Interleaved rounds (the median of the drains is shown).")
@click.option("--only", default="", metavar="KEYS",
              help="Comma-separated frameworks: rfetch (pip install rfetch), rfetch-sp "
              "(rfetch[speedups]), rfetch-pinned, rfetch-none, sidekiq, dramatiq, huey, arq, "
              "rq, rq-fork, celery. [default: all but rfetch-pinned and rfetch-none]")
@click.option("--workloads", default=",".join(WORKLOADS), show_default=True,
              help="Comma-separated subset of: " + ", ".join(WORKLOADS))
@click.option("--logging", "logging_", type=click.Choice(list(LOGGING)), default="both",
              show_default=True, help="Every framework at its default log level, with its "
              "per-job lines off (quiet), or each framework under both.")
@click.option("--latency-count", default=200, show_default=True,
              help="Measured single pushes per framework and logging setting, over the rounds.")
@click.option("--gap-min", default=0.1, show_default=True,
              help="Shortest idle gap before a latency push, seconds.")
@click.option("--gap-max", default=0.6, show_default=True,
              help="Longest idle gap before a latency push, seconds (--gap-min 0.005 "
              "--gap-max 0.02: the short gaps of earlier versions).")
@click.option("--idle-seconds", default=20.0, show_default=True)
@click.option("--max-drain", default=60.0, show_default=True,
              help="Seconds a drain may take before it is cut (slow peers: RQ).")
@click.option("--rtt-all", is_flag=True, help="MONITOR round-trip counts for every framework.")
@click.option("--pin", default=None, metavar="CPUS",
              help="Run every framework's worker under 'taskset -c CPUS' (e.g. 1): what each "
              "peer does when put on one CPU by hand, as rfetch puts itself by default.")
@click.option("--python", "python", default=None,
              help="Interpreter with the peers installed. [default: benchmarks/.venv-peers, "
              "else this one]")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Where to save every figure [default: benchmarks/results/].")
def main(jobs: int, runs: int, only: str, workloads: str, logging_: str, latency_count: int,
         gap_min: float, gap_max: float, idle_seconds: float, max_drain: float,
         rtt_all: bool, pin: str | None, python: str | None, json_path: Path | None) -> None:
    """Benchmark rfetch against every installed peer and print the comparison table."""
    chosen = {w.strip() for w in workloads.split(",") if w.strip()}
    if chosen - set(WORKLOADS):
        raise click.BadParameter(f"unknown workload(s) {sorted(chosen - set(WORKLOADS))}")
    if not 0 <= gap_min <= gap_max:
        raise click.BadParameter("need 0 <= --gap-min <= --gap-max", param_hint="--gap-min")
    python = interpreter(python)
    rt = Runtime(python)
    peers = select(only, rt)
    opts: dict[str, Any] = {
        "jobs": jobs, "runs": runs, "workloads": chosen, "logging": LOGGING[logging_],
        "latency_count": latency_count, "gap_min": gap_min, "gap_max": gap_max,
        "window": WINDOW, "idle_seconds": idle_seconds, "max_drain": max_drain,
        "rtt_all": rtt_all, "pin": pin, "load_start": loadavg(),
        "per_job": [f"{p.key}: {p.per_job_lines or 'none'}" for p, _ in peers],
    }
    logs = RESULTS / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    say(f"python for the frameworks: {python}; worker logs in {logs}")
    variants = variants_of(peers, rt, logs, opts)
    if variants:
        run_rounds(variants, opts)
    opts["load_end"] = loadavg()
    results = [v.result for v in variants]
    click.echo(table(results, opts))
    path = json_path or logs / "results.json"
    path.write_text(json.dumps({"options": {**opts, "workloads": sorted(chosen)},
                                "python": python, "results": [asdict(r) for r in results]},
                               indent=1))
    say(f"figures saved to {path}")


if __name__ == "__main__":
    main()
