"""What the typed script calls of :mod:`rfetch.store.commands` take and return."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rfetch.payload import Routing


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
