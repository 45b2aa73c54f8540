"""What the typed script calls of :mod:`rfetch.store.commands` take and return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from rfetch.jobs.payload import Routing


class Fetched(Protocol):
    """What an acknowledgement needs of a fetched job (a worker's unit of work)."""

    @property
    def queue(self) -> str: ...

    @property
    def raw(self) -> bytes: ...

    @property
    def routing(self) -> Routing | None: ...


@dataclass(frozen=True)
class FetchReply:
    """What one ``fetch.lua`` call did.

    Attributes:
        looked_at: how many queues, from the first named, the script looked at.
        jobs: (index of the queue in the names given, raw payload) of each job moved,
            oldest first.
        broken: index of a queue -> Redis type of its key, for queues skipped because the
            key is not a list.
    """

    looked_at: int
    jobs: list[tuple[int, bytes]]
    broken: dict[int, str]


@dataclass(frozen=True)
class FindReply:
    """What one ``api_find.lua`` call found: entries examined, and for each match its
    position, the entry and its score (None for lists)."""

    examined: int
    matches: list[tuple[int, bytes, float | None]]


@dataclass(frozen=True)
class RequeueReply:
    """What one ``requeue.lua`` call did.

    Attributes:
        pushed: jobs pushed back.
        left: (index of the job in the jobs given, WRONGTYPE message) of each job left in
            the private list because a key on its way holds another type.
    """

    pushed: int
    left: list[tuple[int, str]]


@dataclass(frozen=True)
class DueReply:
    """What one ``enqueue_due.lua`` call did: jobs moved (to their queues, or invalid ones
    to the dead set), and a WRONGTYPE message for each due job left in its set."""

    moved: int
    left: list[str]


class Outgoing(NamedTuple):
    """One job for ``push.lua`` (a tuple: a bulk push builds one per job).

    Attributes:
        queue: its queue name.
        text: its payload (JSON text).
        at: run time of a scheduled job (float epoch seconds), None for now.
        routing: its routing fields when it goes through the gate (ordering key, unique
            lock or tenant), else None.
        window_ms: the unique lock's window in milliseconds (>= 1).
    """

    queue: str
    text: str
    at: float | None = None
    routing: Routing | None = None
    window_ms: int = 1


@dataclass(frozen=True)
class LeaderClaim:
    """What one ``leader_claim.lua`` call answered.

    Attributes:
        status: 2 when this call elected the caller, 1 when it renewed the caller's lease,
            0 when another process leads.
        holder: identity of the leading process ("" when unknown).
        remaining: seconds left on the holder's lease, by Redis's clock.
        redis_time: Redis's ``TIME`` during the call, epoch seconds.
    """

    status: int
    holder: str
    remaining: float
    redis_time: float
