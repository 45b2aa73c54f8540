"""The real system under the model-based test: a redis-server of the tier, a fleet of real
``rfetch worker -r model_jobs`` processes kept across examples, the jobs' evidence files
(``tests/jobs/model_jobs.py``) and the Redis keys that must be empty once the system is
quiet. Only processes this harness started are signalled, each by its own PID."""

from __future__ import annotations

import json
import signal
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import redis

import rfetch
from rfetch.api import Api
from tests.support.wait import wait_for
from tests.support.workers import FAST_ENV, WorkerProcess

WORKERS = 2
"""Live worker processes at every step."""

WORKER_ARGS = ["-r", "model_jobs", "-c", "2", "-t", "1"]
"""Two threads each; TERM gives running jobs 1 s, then pushes them back."""


@dataclass
class Event:
    """One evidence line: ``kind`` (start, ok, fail, stopped, callback, died) of ``jid`` in
    process ``pid`` at ``at`` (epoch seconds), with ``extra``."""

    kind: str
    jid: str
    pid: int
    at: float
    extra: str


@dataclass
class Evidence:
    """Every evidence line of the tier's folder, by jid (read afresh by :meth:`read`)."""

    directory: Path
    by_jid: dict[str, list[Event]] = field(default_factory=dict)

    def read(self) -> Evidence:
        found: dict[str, list[Event]] = defaultdict(list)
        for path in sorted(self.directory.glob("*.log")):
            for line in path.read_text().splitlines():
                parts = line.split("\t")
                if len(parts) != 5:
                    continue  # a line being written
                kind, jid, pid, at, extra = parts
                found[jid].append(Event(kind, jid, int(pid), float(at), extra))
        self.by_jid = {jid: sorted(events, key=lambda e: e.at) for jid, events in found.items()}
        return self

    def events(self, jid: str, kind: str) -> list[Event]:
        return [e for e in self.by_jid.get(jid, []) if e.kind == kind]

    def count(self, jid: str, kind: str) -> int:
        return len(self.events(jid, kind))

    def callbacks(self, bid: str) -> dict[str, list[str]]:
        """event -> the jid of each run of a callback of batch ``bid``."""
        found: dict[str, list[str]] = defaultdict(list)
        for events in self.by_jid.values():
            for event in events:
                if event.kind == "callback" and event.extra.split(" ")[-1] == bid:
                    found[event.extra.split(" ")[0]].append(event.jid)
        return dict(found)

    def recent(self, now: float, seconds: float = 5.0) -> set[str]:
        """Jids running (last event a start) or whose last event is less than ``seconds``
        old: what a KILL or TERM at ``now`` may run again (an acknowledgement may still
        be pending)."""
        found = set()
        for jid, events in self.by_jid.items():
            mine = [e for e in events if e.kind != "died"]
            if mine and (mine[-1].kind == "start" or mine[-1].at > now - seconds):
                found.add(jid)
        return found


class Fleet:
    """The worker processes, :data:`WORKERS` of them live between steps."""

    def __init__(self, redis_url: str, evidence_dir: Path, log_dir: Path) -> None:
        self.redis_url = redis_url
        self.env = {**FAST_ENV, "RFETCH_MODEL_DIR": str(evidence_dir),
                    "RFETCH_JOB_TIMEOUT_GRACE": "1"}
        self.log_dir = log_dir
        self.live: list[WorkerProcess] = []
        self.signalled: set[int] = set()

    def fill(self) -> None:
        """Start workers until :data:`WORKERS` are live (an exited one is replaced)."""
        self.live = [w for w in self.live if w.proc.poll() is None]
        while len(self.live) < WORKERS:
            self.live.append(WorkerProcess(self.redis_url, WORKER_ARGS, self.env, self.log_dir))

    def term(self, index: int) -> None:
        """TERM one worker, wait for its exit (KILL after 15 s), start a replacement."""
        worker = self.live.pop(index % len(self.live))
        self.signalled.add(worker.pid)
        worker.stop(15)
        self.fill()

    def kill(self, index: int) -> None:
        """SIGKILL one worker and start a replacement at once (it recovers the jobs)."""
        worker = self.live.pop(index % len(self.live))
        self.signalled.add(worker.pid)
        worker.kill()
        self.fill()

    def logs(self) -> str:
        return "\n".join(f"--- worker {w.pid}\n{w.log()[-3000:]}" for w in self.live)

    def stop_all(self) -> None:
        for worker in self.live:
            worker.signal(signal.SIGTERM)
        for worker in self.live:
            worker.stop(20)
        self.live = []


@dataclass
class System:
    """What a state machine drives: the Redis, its client and API, the fleet and the
    evidence, and the job module as the test process imported it."""

    redis: redis.Redis
    client: rfetch.Client
    api: Api
    fleet: Fleet
    evidence: Evidence
    jobs: ModuleType


WAITING_PATTERNS = ("queue:*", "rfetch:key:*", "rfetch:cap:*|*", "rfetch:fair:*|*")
"""Lists that hold jobs not yet finished: queues and private lists, key, cap and tenant
lists."""

HELD_PATTERNS = (
    "rfetch:key-holders:*", "rfetch:key-leases:*", "rfetch:cap-slots:*", "rfetch:unique:*",
    "rfetch:dependents:*", "queue:sq|*", "rfetch:fair:*", "rfetch:key:*", "rfetch:cap:*",
)
"""Keys that must be gone once every job ended: a held key, a cap slot, a unique lock,
a registered dependent, a private list, a waiting list or ready ring."""


def pending(r: redis.Redis) -> list[str]:
    """What still waits to run: non-empty waiting lists, due-or-not schedule and retry
    entries, waiting dependents, busy worker threads."""
    found = [k.decode() for p in WAITING_PATTERNS for k in r.scan_iter(match=p, count=1000)
             if r.type(k) == b"list" and r.llen(k)]
    found += [f"{z}:{r.zcard(z)}" for z in ("schedule", "retry") if r.zcard(z)]
    if r.hlen("rfetch:waiting"):
        found.append(f"rfetch:waiting:{r.hlen('rfetch:waiting')}")
    # A lease written by a heartbeat that raced its job's acknowledgement is stale, and
    # removed by the next stuck-key rescue (docs/ordering.md): waited for, not a leak.
    for key in r.scan_iter(match="rfetch:key-leases:*", count=1000):
        found.append(f"{key.decode()}:{r.zrange(key, 0, -1)}")
    for member in r.smembers("processes"):
        busy = r.hget(member, "busy")
        if busy not in (None, b"0"):
            found.append(f"busy:{member.decode()}")
    return found


def held(r: redis.Redis) -> dict[str, str]:
    """Keys left holding something (see :data:`HELD_PATTERNS`), with their contents; a
    cap-held hash counts only with a non-zero count."""
    found: dict[str, str] = {}
    for pattern in HELD_PATTERNS:
        for key in r.scan_iter(match=pattern, count=1000):
            name = key.decode()
            kind = r.type(key).decode()
            if kind == "hash":
                fields = r.hgetall(key)
                found[name] = json.dumps({k.decode(): v.decode() for k, v in fields.items()})
            elif kind == "zset":
                found[name] = str(r.zrange(key, 0, -1, withscores=True))
            elif kind == "list":
                found[name] = f"list of {r.llen(key)}"
            else:
                found[name] = kind
    for key in r.scan_iter(match="rfetch:cap-held:*", count=1000):
        counts = {k.decode(): int(v) for k, v in r.hgetall(key).items() if int(v)}
        if counts:
            found[key.decode()] = json.dumps(counts)
    return found


def wait_quiet(system: System, timeout: float = 90.0) -> None:
    """Wait until nothing waits or runs, twice 0.6 s apart (deferred acknowledgements and
    the poller's last move included).

    Raises:
        AssertionError: still busy after ``timeout`` seconds (a stuck job is a failure).
    """
    r = system.redis

    def quiet() -> bool:
        if pending(r):
            return False
        time.sleep(0.6)
        return not pending(r)

    wait_for(quiet, timeout,
             lambda: f"a quiet system; still pending: {pending(r)}\n{system.fleet.logs()}",
             step=0.3)
