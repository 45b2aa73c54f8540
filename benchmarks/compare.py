"""rfetch against every installed peer, side by side, in one run (performance).

    benchmarks/setup_peers.sh                    # once: the peers' virtualenv
    python -m benchmarks.compare [--jobs 20000] [--runs 3] [--only rfetch,sidekiq,...]

Each framework runs against a fresh private redis-server (one per run of each workload),
its worker started as a subprocess in its own process group and stopped by that group.
Workloads (``--workloads``):

* ``drain``: N no-op jobs (each one INCRBY of ``bench:done``) enqueued with the framework's
  bulk API (timed: the bulk enqueue figure), then one worker process at -c 10 drains them;
  steady jobs/s between 10 % and 90 % done, median of ``--runs``; peak RSS (VmHWM summed
  over the worker's process tree); Redis commands per job from INFO commandstats.
* ``sleep``: the same with jobs that sleep 1 ms first, at -c 50.
* ``latency``: one job at a time, 500 times, into an idle worker; enqueue -> start =
  the start time the job records minus the client's time just before the push.
* ``idle``: Redis commands per second of an idle worker listening to 1 and to 20 queues.
* ``rtt``: rfetch's commands per job under load split into top-level calls and calls made
  inside Lua (MONITOR); ``--rtt-all`` does it for every framework.

The harness's own commands (INFO, its polling GETs, one MULTI) and the jobs' own INCRBYs
are taken out of every command count.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

from benchmarks.common import (
    RESULTS,
    Monitor,
    PrivateRedis,
    client_addr,
    command_counts,
    diff_counts,
    stop_group,
    watch_drain,
    without,
)
from benchmarks.peers import all_peers
from benchmarks.peers.base import DONE, RESULT_PREFIX, Peer, Runtime

HERE = Path(__file__).resolve().parent
PEERS_PYTHON = HERE / ".venv-peers" / "bin" / "python"
WORKLOADS = ("drain", "sleep", "latency", "idle", "rtt")
MANY_QUEUES = [f"q{i:02d}" for i in range(20)]


def say(text: str) -> None:
    click.echo(text, err=True)


@dataclass
class Result:
    """Everything measured for one framework."""

    key: str
    label: str
    fetch: str
    version: str
    multi_queue: bool = True
    drain: list[dict[str, Any]] = field(default_factory=list)
    sleep: list[dict[str, Any]] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)
    idle: dict[str, dict[str, Any]] = field(default_factory=dict)
    rtt: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def median(self, runs: list[dict[str, Any]], name: str) -> float | None:
        values = [r[name] for r in runs if r.get(name) is not None]
        return float(statistics.median(values)) if values else None

    def exact(self, runs: list[dict[str, Any]]) -> bool:
        return all(r.get("exact", True) for r in runs)


class Bench:
    """Runs the workloads for one framework."""

    def __init__(self, peer: Peer, rt: Runtime, logs: Path, limit: float,
                 pin: str | None = None) -> None:
        self.peer = peer
        self.rt = rt
        self.logs = logs
        self.limit = limit
        self.pin = pin

    def client(self, server: PrivateRedis, queues: Sequence[str], args: Sequence[str],
               timeout: float) -> dict[str, Any]:
        """Run the framework's client side; its result dict.

        Raises:
            RuntimeError: the client failed or printed no result.
        """
        env = self.peer.worker_env(self.rt, server.url, 10, queues)
        try:
            out = subprocess.run(self.peer.client_argv(self.rt, args), env=env, cwd=self.rt.repo,
                                 capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"client {' '.join(args)} took over {timeout:.0f} s") from None
        for line in out.stdout.splitlines():
            if line.startswith(RESULT_PREFIX):
                result: dict[str, Any] = json.loads(line.removeprefix(RESULT_PREFIX))
                return result
        raise RuntimeError(f"client {' '.join(args)} failed (exit {out.returncode}): "
                           f"{out.stderr.strip()[-1500:]}")

    def worker(self, server: PrivateRedis, concurrency: int, queues: Sequence[str],
               name: str) -> subprocess.Popen[bytes]:
        log = self.logs / f"{self.peer.key}-{name}.log"
        argv = self.peer.worker_argv(self.rt, concurrency, queues)
        if self.pin is not None:  # --pin: the whole worker process tree on those CPUs
            argv = ["taskset", "-c", self.pin, *argv]
        with open(log, "wb") as out:
            return subprocess.Popen(
                argv,
                env=self.peer.worker_env(self.rt, server.url, concurrency, queues),
                cwd=self.rt.repo, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log_tail(self, name: str) -> str:
        path = self.logs / f"{self.peer.key}-{name}.log"
        try:
            lines = path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-5:])

    def drain(self, kind: str, jobs: int, concurrency: int, monitor: bool = False
              ) -> dict[str, Any]:
        """Fill ``jobs`` jobs with the bulk API, then drain them with one worker."""
        concurrency = self.peer.concurrency(concurrency)
        name = f"{kind}-c{concurrency}"
        with PrivateRedis() as server:
            fill = self.client(server, ["default"], ["fill", kind, str(jobs)], timeout=600)
            mon = Monitor(server.port, {client_addr(server.client)}) if monitor else None
            before = command_counts(server.client)
            proc = self.worker(server, concurrency, ["default"], name)
            try:
                progress = watch_drain(server, proc, jobs, self.limit)
                pipe = server.client.pipeline(transaction=True)
                pipe.info("commandstats")
                pipe.get(DONE)
                stats, done_text = pipe.execute()
            finally:
                stop_group(proc)
                if mon is not None:
                    mon.stop()
            if progress.error:
                raise RuntimeError(f"{progress.error}; log: {self.log_tail(name)}")
        after = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}
        done = int(done_text or 0)
        # Harness: the INFO before, the polling GETs, the MULTI of the snapshot.
        counts = without(diff_counts(before, after), info=1, get=progress.gets, multi=1)
        own = without(counts, incrby=done)  # the jobs' own INCRBY is the workload
        steady, exact = progress.steady(jobs)
        result: dict[str, Any] = {
            "steady": steady, "exact": exact, "done": done, "complete": progress.complete,
            "bulk": jobs / fill["seconds"], "rss_mb": progress.peak_mb,
            "cpu_us_per_job": progress.cpu_us_per_job(jobs),
            "bulk_cpu_us_per_job": fill.get("cpu_seconds", 0.0) * 1e6 / max(jobs, 1),
            "cmds_per_job": sum(own.values()) / max(done, 1),
            "commands": dict(sorted(own.items(), key=lambda kv: -kv[1])),
        }
        if mon is not None:
            top = without(dict(mon.top), incrby=done)
            lua = dict(mon.lua)
            result["monitor"] = {
                "top_per_job": sum(top.values()) / max(done, 1),
                "lua_per_job": sum(lua.values()) / max(done, 1),
                "top": dict(sorted(top.items(), key=lambda kv: -kv[1])),
                "lua": dict(sorted(lua.items(), key=lambda kv: -kv[1])),
                "connections": len(mon.clients),
            }
        return result

    def ready(self, server: PrivateRedis, queues: Sequence[str]) -> None:
        """Wait (up to 60 s) until the worker runs a job pushed to the last queue."""
        self.client(server, queues, ["latency", "1", "--warmup", "0", "--queue", queues[-1],
                                     "--timeout", "60"], timeout=90)

    def latency(self, count: int) -> list[float]:
        concurrency = self.peer.concurrency(10)
        with PrivateRedis() as server:
            proc = self.worker(server, concurrency, ["default"], "latency")
            try:
                result = self.client(server, ["default"], ["latency", str(count)],
                                     timeout=60 + count * 0.5)
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}; log: {self.log_tail('latency')}") from None
            finally:
                stop_group(proc)
        latencies: list[float] = result["latencies"]
        return latencies

    def idle(self, queues: Sequence[str], seconds: float) -> dict[str, Any]:
        concurrency = self.peer.concurrency(10)
        name = f"idle-{len(queues)}q"
        with PrivateRedis() as server:
            proc = self.worker(server, concurrency, queues, name)
            try:
                try:
                    self.ready(server, queues)
                except RuntimeError as exc:
                    raise RuntimeError(f"{exc}; log: {self.log_tail(name)}") from None
                time.sleep(2.0)  # let the probe job's acknowledgement settle
                # MONITOR costs nothing much when idle, and splits out the calls made in Lua.
                mon = Monitor(server.port, {client_addr(server.client)})
                before = command_counts(server.client)
                started = time.monotonic()
                time.sleep(seconds)
                after = command_counts(server.client)
                elapsed = time.monotonic() - started
                mon.stop()
                alive = proc.poll() is None
            finally:
                stop_group(proc)
        if not alive:
            raise RuntimeError(f"worker exited during the idle period; log: "
                               f"{self.log_tail(name)}")
        counts = without(diff_counts(before, after), info=1)
        return {"per_second": sum(counts.values()) / elapsed, "seconds": elapsed,
                "top_per_second": sum(mon.top.values()) / elapsed,
                "lua_per_second": sum(mon.lua.values()) / elapsed,
                "commands": dict(sorted(counts.items(), key=lambda kv: -kv[1])),
                "top": dict(mon.top.most_common()), "lua": dict(mon.lua.most_common())}


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def run_peer(peer: Peer, rt: Runtime, version: str, opts: dict[str, Any], logs: Path) -> Result:
    res = Result(peer.key, f"{peer.label} {version}", peer.fetch, version, peer.multi_queue)
    bench = Bench(peer, rt, logs, opts["max_drain"], opts["pin"])
    workloads: set[str] = opts["workloads"]

    def attempt(what: str, func: Any, *args: Any) -> Any:
        say(f"  {peer.key}: {what} ...")
        started = time.monotonic()
        try:
            value = func(*args)
        except Exception as exc:  # one framework failing must not stop the others
            res.errors.append(f"{what}: {exc}")
            say(f"  {peer.key}: {what} FAILED: {exc}")
            return None
        say(f"  {peer.key}: {what} done in {time.monotonic() - started:.1f} s: "
            f"{summary(value)}")
        return value

    jobs, runs = opts["jobs"], opts["runs"]
    for run in range(1, runs + 1):
        if "drain" in workloads:
            out = attempt(f"drain run {run}/{runs} ({jobs} no-op jobs, -c 10)",
                          bench.drain, "noop", jobs, 10)
            if out:
                res.drain.append(out)
        if "sleep" in workloads:
            out = attempt(f"sleep run {run}/{runs} ({jobs} 1 ms jobs, -c 50)",
                          bench.drain, "sleep", jobs, 50)
            if out:
                res.sleep.append(out)
    if "latency" in workloads:
        out = attempt(f"latency ({opts['latency_count']} single pushes)", bench.latency,
                      opts["latency_count"])
        if out:
            res.latency = out
    if "idle" in workloads:
        for queues in (["default"], MANY_QUEUES):
            if len(queues) > 1 and not peer.multi_queue:
                say(f"  {peer.key}: idle with 20 queues skipped: one queue per worker")
                continue
            out = attempt(f"idle cost, {len(queues)} queue(s), {opts['idle_seconds']:.0f} s",
                          bench.idle, queues, opts["idle_seconds"])
            if out:
                res.idle[str(len(queues))] = out
    if "rtt" in workloads and (peer.key.startswith("rfetch") or opts["rtt_all"]):
        out = attempt(f"round trips under MONITOR ({jobs} no-op jobs, -c 10)", bench.drain,
                      "noop", jobs, 10, True)
        if out:
            res.rtt = out
    return res


def summary(value: Any) -> str:
    if isinstance(value, list):
        p50, p99 = percentile(value, 0.5) * 1000, percentile(value, 0.99) * 1000
        return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
    if isinstance(value, dict) and "steady" in value:
        text = (f"{value['steady']:.0f} jobs/s{'' if value['exact'] else ' (time-capped)'}, "
                f"bulk {value['bulk']:.0f}/s, RSS {value['rss_mb']:.1f} MB, "
                f"{value['cmds_per_job']:.2f} cmds/job")
        if "monitor" in value:
            m = value["monitor"]
            text += f"; top-level {m['top_per_job']:.2f}/job, in Lua {m['lua_per_job']:.2f}/job"
        return text
    if isinstance(value, dict) and "per_second" in value:
        top = ", ".join(f"{k} {v}" for k, v in list(value["commands"].items())[:5])
        return (f"{value['per_second']:.2f} cmds/s ({top}); top-level "
                f"{value['top_per_second']:.2f}/s, in Lua {value['lua_per_second']:.2f}/s")
    return str(value)


# --- the tables ---------------------------------------------------------------------------


def fmt_rate(value: float | None, exact: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}{'' if exact else '*'}"


def figures(res: Result) -> dict[str, float | None]:
    idle1 = res.idle.get("1", {}).get("per_second")
    idle20 = res.idle.get("20", {}).get("per_second")
    return {
        "steady": res.median(res.drain, "steady"),
        "sleep": res.median(res.sleep, "steady"),
        "bulk": res.median(res.drain, "bulk"),
        "p50": percentile(res.latency, 0.5) * 1000 if res.latency else None,
        "p99": percentile(res.latency, 0.99) * 1000 if res.latency else None,
        "idle1": idle1,
        "idle20": idle20,
        "top1": res.idle.get("1", {}).get("top_per_second"),
        "top20": res.idle.get("20", {}).get("top_per_second"),
        "cmds": res.median(res.drain, "cmds_per_job"),
        "rss": max((r["rss_mb"] for r in res.drain), default=None),
    }


def table(results: list[Result], opts: dict[str, Any]) -> str:
    lines = [
        f"{opts['jobs']:,} jobs, 1 worker process, -c 10 (sleep: -c 50), median of "
        f"{opts['runs']} run(s); * = drain cut at {opts['max_drain']:.0f} s, rate to the cut"
        + (f"; every worker run under taskset -c {opts['pin']}" if opts["pin"] else ""),
        "",
        "| framework | fetch | steady jobs/s | 1 ms sleep jobs/s (-c 50) | bulk enqueue jobs/s "
        "| latency p50 / p99 ms | idle cmds/s 1 q / 20 q | idle top-level calls/s 1 q / 20 q "
        "| Redis cmds/job | worker RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    for res in results:
        f = figures(res)

        def pair(a: float | None, b: float | None, res: Result = res) -> str:
            many = "-" if res.multi_queue else "n/a"
            return ("-" if a is None else f"{a:.2f}") + " / " + (
                many if b is None else f"{b:.2f}")

        lat = f"{f['p50']:.2f} / {f['p99']:.2f}" if f["p50"] is not None else "-"
        lines.append(
            f"| {res.label} | {res.fetch} | {fmt_rate(f['steady'], res.exact(res.drain))} "
            f"| {fmt_rate(f['sleep'], res.exact(res.sleep))} | {fmt_rate(f['bulk'])} | {lat} "
            f"| {pair(f['idle1'], f['idle20'])} | {pair(f['top1'], f['top20'])} "
            f"| {'-' if f['cmds'] is None else format(f['cmds'], '.2f')} "
            f"| {'-' if f['rss'] is None else format(f['rss'], '.1f')} |"
        )
    base = next((r for r in results if r.key == "rfetch"), None)
    others = [r for r in results if r is not base]
    if base is not None and others:
        mine = figures(base)
        lines += [
            "",
            "rfetch / peer (throughput: above 1 is rfetch faster; latency, idle cost, RSS: "
            "below 1 is rfetch better)",
            "",
            "| peer | steady | 1 ms sleep | bulk enqueue | latency p50 | latency p99 "
            "| idle 1 q | worker RSS |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for res in others:
            theirs = figures(res)

            def ratio(name: str, theirs: dict[str, float | None] = theirs) -> str:
                a, b = mine[name], theirs[name]
                if a is None or not b:
                    return "-"
                return f"{a / b:.2f}x" if a / b >= 0.1 else f"{a / b:.3f}x"

            lines.append(f"| {res.label} | {ratio('steady')} | {ratio('sleep')} "
                         f"| {ratio('bulk')} | {ratio('p50')} | {ratio('p99')} "
                         f"| {ratio('idle1')} | {ratio('rss')} |")
    for res in results:
        if res.rtt.get("monitor"):
            m = res.rtt["monitor"]
            top = ", ".join(f"{k} {v / max(res.rtt['done'], 1):.3f}" for k, v in m["top"].items()
                            if v / max(res.rtt["done"], 1) >= 0.001)
            lua = ", ".join(f"{k} {v / max(res.rtt['done'], 1):.3f}" for k, v in m["lua"].items()
                            if v / max(res.rtt["done"], 1) >= 0.001)
            lines += [
                "",
                f"{res.label}: Redis commands per job under load (MONITOR, "
                f"{res.rtt['done']:,} jobs, the jobs' own INCRBY and the harness left out):",
                f"  total {m['top_per_job'] + m['lua_per_job']:.3f} = top-level calls "
                f"{m['top_per_job']:.3f} + inside Lua {m['lua_per_job']:.3f}; INFO "
                f"commandstats (counts both) {res.rtt['cmds_per_job']:.3f}",
                f"  top-level per job: {top or '-'}",
                f"  inside Lua per job: {lua or '-'}",
            ]
    idles = [(res, name, idle) for res in results for name, idle in sorted(res.idle.items())]
    if idles:
        lines += ["", "Idle cost (commands/s; commandstats counts calls made inside Lua too):"]
    for res, name, idle in idles:
        secs = idle["seconds"]
        top = ", ".join(f"{k} {v / secs:.2f}" for k, v in idle["top"].items())
        lua = ", ".join(f"{k} {v / secs:.2f}" for k, v in idle["lua"].items())
        lines.append(f"  {res.label}, {name} queue(s): total {idle['per_second']:.2f}; "
                     f"top-level {idle['top_per_second']:.2f} ({top or 'none'}); "
                     f"in Lua {idle['lua_per_second']:.2f} ({lua or 'none'})")
    for res in results:
        for error in res.errors:
            lines.append(f"{res.label}: FAILED {error}")
    return "\n".join(lines)


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=20_000, show_default=True, help="Jobs per drain.")
@click.option("--runs", default=3, show_default=True, help="Drain runs (median is shown).")
@click.option("--only", default="", metavar="KEYS",
              help="Comma-separated frameworks: rfetch, rfetch-plain, rfetch-pinned, "
              "rfetch-none, sidekiq, dramatiq, huey, arq, rq, rq-fork, celery. [default: all "
              "but rfetch-plain, rfetch-pinned and rfetch-none]")
@click.option("--workloads", default=",".join(WORKLOADS), show_default=True,
              help="Comma-separated subset of: " + ", ".join(WORKLOADS))
@click.option("--latency-count", default=500, show_default=True)
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
def main(jobs: int, runs: int, only: str, workloads: str, latency_count: int,
         idle_seconds: float, max_drain: float, rtt_all: bool, pin: str | None,
         python: str | None, json_path: Path | None) -> None:
    """Benchmark rfetch against every installed peer and print the comparison table."""
    chosen = {w.strip() for w in workloads.split(",") if w.strip()}
    if chosen - set(WORKLOADS):
        raise click.BadParameter(f"unknown workload(s) {sorted(chosen - set(WORKLOADS))}")
    if python is None:
        if PEERS_PYTHON.exists():
            python = str(PEERS_PYTHON)
        else:
            python = sys.executable
            say(f"note: {PEERS_PYTHON} not found (run benchmarks/setup_peers.sh); Python "
                "peers that this interpreter lacks are skipped")
    rt = Runtime(python)
    peers = all_peers()
    keys = [k.strip() for k in only.split(",") if k.strip()]
    unknown = set(keys) - {p.key for p in peers}
    if unknown:
        raise click.BadParameter(f"unknown framework(s) {sorted(unknown)}", param_hint="--only")
    selected = [p for p in peers if (p.key in keys if keys else p.default)]
    opts = {"jobs": jobs, "runs": runs, "workloads": chosen, "latency_count": latency_count,
            "idle_seconds": idle_seconds, "max_drain": max_drain, "rtt_all": rtt_all,
            "pin": pin}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    logs = RESULTS / f"compare-{stamp}"
    logs.mkdir(parents=True, exist_ok=True)
    say(f"python for the frameworks: {python}; worker logs in {logs}")
    results = []
    for peer in selected:
        version = peer.version(rt)
        if version is None:
            say(f"{peer.key}: not installed, skipped")
            continue
        say(f"{peer.key} {version}")
        results.append(run_peer(peer, rt, version, opts, logs))
    text = table(results, opts)
    click.echo(text)
    path = json_path or logs / "results.json"
    path.write_text(json.dumps({"options": {**opts, "workloads": sorted(chosen)},
                                "python": python, "results": [asdict(r) for r in results]},
                               indent=1))
    say(f"figures saved to {path}")


if __name__ == "__main__":
    main()
