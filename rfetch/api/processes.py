"""Worker processes: heartbeats, running jobs, remote quiet/stop, cleanup of the dead.

Read from Sidekiq's keys: the ``processes`` set, each ``<identity>`` heartbeat hash and each
``<identity>:work`` hash. Remote control is Sidekiq's: ``LPUSH`` a signal name to
``<identity>-signals`` and ``EXPIRE`` it 60 s; the process pops it at its next heartbeat.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from rfetch.errors import RfetchError
from rfetch.jobs.payload import epoch_seconds
from rfetch.worker.capacity import ASYNC_CAPSULE, capsule_concurrency

from .context import Context
from .records import JobRecord, to_text
from .workflows import progress_of

SIGNAL_TTL = 60
"""Seconds a remote signal waits for its process (Sidekiq's ``Process#signal``)."""


class ProcessNotFound(RfetchError, LookupError):
    """No process with this identity is in ``processes`` or has a heartbeat."""


@dataclass(frozen=True)
class RunningJob:
    """A job a busy thread is running (from ``<identity>:work``).

    Attributes:
        identity: the process.
        thread_id: the thread's id (hex), the hash field.
        queue: queue it was fetched from.
        run_at: when it started, epoch seconds.
        job: its payload.
        progress: what the job last reported with ``self.progress`` (``{percent,
            message, at}``), or None.
    """

    identity: str
    thread_id: str
    queue: str
    run_at: float | None
    job: JobRecord
    progress: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"identity": self.identity, "thread_id": self.thread_id, "queue": self.queue,
                "run_at": self.run_at, "job": self.job.to_dict(), "progress": self.progress}


@dataclass(frozen=True)
class ProcessInfo:
    """One worker process as its heartbeat describes it.

    Attributes:
        identity: ``hostname:pid:<12 hex>``.
        alive: whether its heartbeat hash exists (it expires ``heartbeat_ttl`` after the
            last beat).
        info: the ``info`` JSON (hostname, started_at, pid, tag, concurrency, capsules,
            queues, ...).
        busy: jobs running at the last beat, on threads and event-loop slots.
        busy_threads: of those, on processor threads (sync jobs).
        busy_async: of those, on event-loop slots (async jobs).
        concurrency_field: the hash's ``concurrency`` field (Sidekiq 8.1.2+, rfetch), or
            None when the process wrote none (then ``info`` has it).
        beat: time of the last beat, float epoch seconds.
        quiet: whether it has stopped fetching (TSTP, or shutting down).
        rss_kb: resident memory, KiB.
        rtt_us: Redis round trip of its heartbeat, microseconds.
        running: the jobs its threads run.
    """

    identity: str
    alive: bool
    info: dict[str, Any]
    busy: int = 0
    busy_threads: int = 0
    busy_async: int = 0
    concurrency_field: int | None = None
    beat: float | None = None
    quiet: bool = False
    rss_kb: int = 0
    rtt_us: int = 0
    running: list[RunningJob] = field(default_factory=list)

    @property
    def hostname(self) -> str:
        """Host name."""
        return str(self.info.get("hostname") or self.identity.rsplit(":", 2)[0])

    @property
    def pid(self) -> int | None:
        """Process id."""
        pid = self.info.get("pid")
        return pid if isinstance(pid, int) else None

    @property
    def tag(self) -> str | None:
        """``-g`` tag."""
        tag = self.info.get("tag")
        return tag if isinstance(tag, str) else None

    @property
    def started_at(self) -> float | None:
        """Start time, float epoch seconds."""
        value = self.info.get("started_at")
        return float(value) if isinstance(value, (int, float)) else None

    @property
    def concurrency(self) -> int:
        """Jobs it can run at once: processor threads plus event-loop slots (Sidekiq's
        ``concurrency``, the sum over its capsules)."""
        if self.concurrency_field is not None:
            return self.concurrency_field
        value = self.info.get("concurrency")
        return value if isinstance(value, int) else 0

    @property
    def async_slots(self) -> int:
        """Event-loop slots for async jobs (0 for a process without a loop, or a Sidekiq
        one)."""
        return capsule_concurrency(self.info, ASYNC_CAPSULE) or 0

    @property
    def threads(self) -> int:
        """Threads: ``concurrency`` less the loop slots (a Sidekiq process's every capsule
        counts as threads)."""
        return max(self.concurrency - self.async_slots, 0)

    @property
    def queues(self) -> list[str]:
        """Queues it fetches from."""
        value = self.info.get("queues")
        return [str(q) for q in value] if isinstance(value, list) else []

    @property
    def labels(self) -> list[str]:
        """Labels."""
        value = self.info.get("labels")
        return [str(v) for v in value] if isinstance(value, list) else []

    @property
    def swarm(self) -> str | None:
        """``host:pid`` of the swarm's parent (``rfetch worker --processes``) that runs this
        process, or None for a worker on its own: processes with the same value are one
        swarm."""
        value = self.info.get("swarm")
        return value if isinstance(value, str) else None

    @property
    def slot(self) -> int | None:
        """Its slot (0-based) in its swarm, or None."""
        value = self.info.get("slot")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def version(self) -> str | None:
        """rfetch (or Sidekiq) version."""
        value = self.info.get("version")
        return value if isinstance(value, str) else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "identity": self.identity,
            "alive": self.alive,
            "hostname": self.hostname,
            "pid": self.pid,
            "tag": self.tag,
            "started_at": self.started_at,
            "concurrency": self.concurrency,
            "threads": self.threads,
            "async_slots": self.async_slots,
            "queues": self.queues,
            "labels": self.labels,
            "version": self.version,
            "swarm": self.swarm,
            "slot": self.slot,
            "busy": self.busy,
            "busy_threads": self.busy_threads,
            "busy_async": self.busy_async,
            "beat": self.beat,
            "quiet": self.quiet,
            "rss_kb": self.rss_kb,
            "rtt_us": self.rtt_us,
            "running": [job.to_dict() for job in self.running],
        }


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


class ProcessSet:
    """The worker processes (Sidekiq's ``ProcessSet``).

    Args:
        ctx: the API context.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def identities(self) -> list[str]:
        """Members of ``processes``, sorted (live or not yet cleaned up)."""
        return sorted(to_text(m) for m in self.ctx.redis.smembers(self.ctx.keys.processes))

    def all(self, include_dead: bool = False) -> list[ProcessInfo]:
        """Processes in ``processes``, with their heartbeat and running jobs, in two round
        trips. Those whose heartbeat has expired are left out unless ``include_dead``."""
        keys = self.ctx.keys
        names = self.identities()
        pipe = self.ctx.redis.pipeline(transaction=False)
        for identity in names:
            pipe.hgetall(keys.process(identity))
            pipe.hgetall(keys.work(identity))
        replies = pipe.execute()
        found: list[ProcessInfo] = []
        for i, identity in enumerate(names):
            beat = {to_text(k): to_text(v) for k, v in replies[2 * i].items()}
            work = replies[2 * i + 1]
            if not beat and not include_dead:
                continue
            found.append(_process(identity, beat, work))
        found = self._with_progress(found)
        # A swarm's processes side by side, by slot; then the others, as listed.
        return sorted(found, key=lambda p: (p.swarm or p.identity, p.slot or 0))

    def _with_progress(self, found: list[ProcessInfo]) -> list[ProcessInfo]:
        """The processes with their running jobs' progress (one MGET, none when idle)."""
        jids = [j.job.jid for p in found for j in p.running if j.job.jid]
        reports = progress_of(self.ctx, [j for j in jids if j])
        if not reports:
            return found
        return [
            replace(p, running=[replace(j, progress=reports.get(j.job.jid or "")) for j in
                                p.running])
            for p in found
        ]

    def get(self, identity: str) -> ProcessInfo | None:
        """One process by identity (alive or not), or None if unknown."""
        keys = self.ctx.keys
        pipe = self.ctx.redis.pipeline(transaction=False)
        pipe.hgetall(keys.process(identity))
        pipe.hgetall(keys.work(identity))
        pipe.sismember(keys.processes, identity)
        beat_raw, work, listed = pipe.execute()
        if not beat_raw and not listed:
            return None
        beat = {to_text(k): to_text(v) for k, v in beat_raw.items()}
        return self._with_progress([_process(identity, beat, work)])[0]

    def size(self) -> int:
        """Processes whose heartbeat is alive."""
        return len(self.all())

    def running(self) -> list[RunningJob]:
        """Every job running on a live process."""
        return [job for process in self.all() for job in process.running]

    def quiet(self, identity: str) -> None:
        """Ask a process to go quiet (stop fetching, finish running jobs): ``TSTP``."""
        self.signal(identity, "TSTP")

    def stop(self, identity: str) -> None:
        """Ask a process to shut down (quiet, wait ``-t``, push back, exit): ``TERM``."""
        self.signal(identity, "TERM")

    def dump_threads(self, identity: str) -> None:
        """Ask a process to log every thread's stack: ``TTIN``."""
        self.signal(identity, "TTIN")

    def signal(self, identity: str, name: str) -> None:
        """``LPUSH`` ``name`` to ``<identity>-signals`` and ``EXPIRE`` it 60 s in one MULTI
        (Sidekiq's ``Process#signal``); the process acts at its next heartbeat.

        Raises:
            ProcessNotFound: the identity is neither in ``processes`` nor has a heartbeat.
        """
        keys = self.ctx.keys
        pipe = self.ctx.redis.pipeline(transaction=False)
        pipe.sismember(keys.processes, identity)
        pipe.exists(keys.process(identity))
        listed, alive = pipe.execute()
        if not listed and not alive:
            raise ProcessNotFound(f"no process with identity {identity!r}")
        pipe = self.ctx.redis.pipeline(transaction=True)
        pipe.lpush(keys.signals(identity), name)
        pipe.expire(keys.signals(identity), SIGNAL_TTL)
        pipe.execute()

    def cleanup(self) -> list[str]:
        """Remove from ``processes`` the identities whose heartbeat hash is gone (Sidekiq's
        ``ProcessSet#cleanup``); returns them. ``rfetch:identities`` is left alone: orphan
        recovery finds the dead processes' private lists through it. A live process that
        missed a beat is re-added by its next heartbeat."""
        keys = self.ctx.keys
        names = self.identities()
        pipe = self.ctx.redis.pipeline(transaction=False)
        for identity in names:
            pipe.exists(keys.process(identity))
        dead = [name for name, alive in zip(names, pipe.execute(), strict=True) if not alive]
        if dead:
            self.ctx.redis.srem(keys.processes, *dead)
        return dead


def _busy(beat: dict[str, str]) -> dict[str, Any]:
    """``busy`` and its split from a heartbeat hash. A process that wrote no split (Sidekiq,
    rfetch before it) runs every job on a thread."""
    busy = _int(beat.get("busy"))
    looped = _int(beat.get("busy_async"))
    threads = _int(beat.get("busy_threads")) if "busy_threads" in beat else busy - looped
    concurrency = beat.get("concurrency")
    return {"busy": busy, "busy_threads": threads, "busy_async": looped,
            "concurrency_field": _int(concurrency) if concurrency is not None else None}


def _process(identity: str, beat: dict[str, str], work: dict[Any, Any]) -> ProcessInfo:
    try:
        info = json.loads(beat.get("info") or "{}")
    except ValueError:
        info = {}
    running: list[RunningJob] = []
    for tid, entry in sorted(work.items()):
        try:
            data = json.loads(entry)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        payload = data.get("payload")
        if isinstance(payload, dict):  # Sidekiq 7.0 wrote the payload as an object
            payload = json.dumps(payload)
        running.append(
            RunningJob(
                identity=identity,
                thread_id=to_text(tid),
                queue=str(data.get("queue") or ""),
                run_at=epoch_seconds(data.get("run_at")),
                job=JobRecord.parse(payload if isinstance(payload, str) else "", "running"),
            )
        )
    return ProcessInfo(
        identity=identity,
        alive=bool(beat),
        info=info if isinstance(info, dict) else {},
        **_busy(beat),
        beat=_float(beat.get("beat")),
        quiet=beat.get("quiet") == "true",
        rss_kb=_int(beat.get("rss")),
        rtt_us=_int(beat.get("rtt_us")),
        running=running,
    )
