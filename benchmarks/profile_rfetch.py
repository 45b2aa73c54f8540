"""Profile rfetch's per-job path with py-spy.

    python -m benchmarks.profile_rfetch [--jobs 80000] [-c 10] [--rate 100] [--top 25]

Starts its own redis-server, enqueues N no-op jobs (``perform_bulk``), starts one
``rfetch worker -c C`` and attaches ``py-spy record --gil -f raw`` to it for the whole
drain (``--gil``: only samples of the thread holding the GIL, i.e. where Python time goes),
then prints the top frames by own samples (the frame was running) and by inclusive samples
(the frame was on the stack). py-spy comes from the peers' virtualenv
(benchmarks/setup_peers.sh) or PATH. The raw profile is kept under benchmarks/results/.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import click

from benchmarks.common import RESULTS, PrivateRedis, stop_group, watch_drain
from benchmarks.compare import PEERS_PYTHON
from benchmarks.peers.base import RESULT_PREFIX, Runtime
from benchmarks.peers.rfetch import RfetchPeer

FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")


def short(path: str) -> str:
    """A file path without the site-packages or repository prefix."""
    for marker in ("site-packages/", "/work/main/", "lib/python3."):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker == "lib/python3.":
                path = "stdlib/" + path.split("/", 1)[-1]
    return path


def frame_key(frame: str, by_line: bool) -> str:
    match = FRAME.match(frame)
    if not match:
        return frame
    where = short(match["file"])
    if by_line and match["line"]:
        where += f":{match['line']}"
    return f"{match['func']} ({where})"


def summarise(raw: Path, top: int, by_line: bool) -> str:
    """Top frames by own and inclusive samples from py-spy's raw (collapsed) output."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame_key(f, by_line) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if not total:
        return "no samples"
    out = [f"{total} samples holding the GIL", "", f"top {top} by own samples:"]
    out += [f"  {n / total:6.1%}  {name}" for name, n in own.most_common(top)]
    out += ["", f"top {top} by inclusive samples:"]
    out += [f"  {n / total:6.1%}  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(out)


def py_spy(python: str) -> str:
    beside = Path(python).parent / "py-spy"
    if beside.exists():
        return str(beside)
    found = shutil.which("py-spy")
    if not found:
        raise click.ClickException("py-spy not found: run benchmarks/setup_peers.sh "
                                   "or pip install py-spy")
    return found


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--jobs", default=80_000, show_default=True)
@click.option("--concurrency", "-c", default=10, show_default=True)
@click.option("--rate", default=100, show_default=True, help="py-spy samples per second.")
@click.option("--top", default=25, show_default=True, help="Frames listed per table.")
@click.option("--by-line", is_flag=True, help="Keep line numbers (one row per line).")
@click.option("--python", "python", default=None,
              help="Interpreter for the worker. [default: the peers' venv, else this one]")
@click.option("--limit", default=600.0, show_default=True, help="Seconds the drain may take.")
def main(jobs: int, concurrency: int, rate: int, top: int, by_line: bool,
         python: str | None, limit: float) -> None:
    """Profile an rfetch worker draining JOBS no-op jobs."""
    import sys

    rt = Runtime(python or (str(PEERS_PYTHON) if PEERS_PYTHON.exists() else sys.executable))
    spy = py_spy(rt.python)
    peer = RfetchPeer()
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    raw = RESULTS / f"profile-{stamp}.txt"
    log = RESULTS / f"profile-{stamp}-worker.log"
    with PrivateRedis() as server:
        env = peer.worker_env(rt, server.url, concurrency, ["default"])
        fill = subprocess.run(peer.client_argv(rt, ["fill", "noop", str(jobs)]), env=env,
                              cwd=rt.repo, capture_output=True, text=True, timeout=600)
        if RESULT_PREFIX not in fill.stdout:
            raise click.ClickException(f"enqueue failed: {fill.stderr[-1500:]}")
        with open(log, "wb") as out:
            worker = subprocess.Popen(peer.worker_argv(rt, concurrency, ["default"]), env=env,
                                      cwd=rt.repo, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        spy_proc = subprocess.Popen(
            [spy, "record", "--pid", str(worker.pid), "--gil", "-f", "raw", "-o", str(raw),
             "-r", str(rate)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
        )
        try:
            progress = watch_drain(server, worker, jobs, limit)
        finally:
            # SIGINT makes py-spy write its output and exit.
            if spy_proc.poll() is None:
                spy_proc.send_signal(signal.SIGINT)
            try:
                _, spy_err = spy_proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                stop_group(spy_proc)
                spy_err = b""
            stop_group(worker)
    steady, exact = progress.steady(jobs)
    click.echo(f"rfetch worker -c {concurrency}, {progress.done:,} of {jobs:,} no-op jobs under "
               f"py-spy ({rate}/s, --gil): steady {steady:,.0f} jobs/s"
               f"{'' if exact else ' (incomplete)'}; raw profile {raw}")
    if progress.error:
        click.echo(f"warning: {progress.error}; worker log {log}")
    if not raw.exists():
        raise click.ClickException(f"py-spy wrote no profile: {spy_err.decode()[-1500:]}")
    click.echo(summarise(raw, top, by_line))


if __name__ == "__main__":
    main()
