"""What :func:`rfetch.api.explain.explain` answers: the places where a job is
(:class:`Location`) and the whole answer (:class:`Explanation`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .records import JobRecord


@dataclass(frozen=True)
class Location:
    """One place where the job is.

    Attributes:
        state: ``running``, ``held`` (in a private list, not running), ``queued`` (also
            in a tenant's list), ``waiting_key`` (behind its ordering key's holder),
            ``waiting_cap`` (for a slot of its concurrency key: fetch caps),
            ``scheduled``, ``retry`` or ``dead``; ``batch``: a line about the job's batch;
            ``cancel``: a line saying a cancel mark is pending; ``iteration`` / ``steps``:
            a durable job's saved cursor / recorded steps (docs/durable-jobs.md).
        text: one line saying where it is and why it is not running.
        job: the entry found.
        queue: queue it waits in, was fetched from, or will go to.
        position: ``queued``: jobs that run before it (0 = next).
        queue_size: ``queued``: jobs in the queue.
        paused: ``queued``: whether the queue is paused.
        at: run time (scheduled), next retry (retry), death (dead), start (running); epoch s.
        identity: ``running`` / ``held``: the process.
        alive: ``running`` / ``held``: whether that process's heartbeat is alive.
    """

    state: str
    text: str
    job: JobRecord | None = None
    queue: str | None = None
    position: int | None = None
    queue_size: int | None = None
    paused: bool = False
    at: float | None = None
    identity: str | None = None
    alive: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "state": self.state,
            "text": self.text,
            "queue": self.queue,
            "position": self.position,
            "queue_size": self.queue_size,
            "paused": self.paused,
            "at": self.at,
            "identity": self.identity,
            "alive": self.alive,
            "job": self.job.to_dict() if self.job is not None else None,
        }


@dataclass(frozen=True)
class Explanation:
    """The answer of :func:`explain`.

    Attributes:
        jid: the jid asked about.
        locations: every place the job was found (usually one; a jid pushed twice, or a
            job running while a copy waits, gives more).
        incomplete: places where ``max_scan`` stopped the search before the end: the job
            may be there, further down.
    """

    jid: str
    locations: list[Location] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        """Whether the job was found anywhere."""
        return bool(self.locations)

    @property
    def state(self) -> str:
        """State of the first location, or ``not_found``."""
        return self.locations[0].state if self.locations else "not_found"

    @property
    def summary(self) -> str:
        """One line (the first location, or why it was not found)."""
        return self.lines()[0]

    def lines(self) -> list[str]:
        """Every line of the explanation, for people."""
        out = [f"jid {self.jid}: {loc.text}" for loc in self.locations]
        if not out:
            out.append(
                f"jid {self.jid}: not found in running jobs, private lists, queues, or the "
                "scheduled, retry and dead sets: it finished (rfetch records the end only of "
                "store_result jobs), was deleted or discarded, or never existed"
            )
        if self.incomplete:
            out.append(
                "search bound (max_scan) hit in: " + ", ".join(self.incomplete)
                + "; the job may be further down there"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "jid": self.jid,
            "state": self.state,
            "found": self.found,
            "summary": self.summary,
            "lines": self.lines(),
            "locations": [loc.to_dict() for loc in self.locations],
            "incomplete": self.incomplete,
        }
