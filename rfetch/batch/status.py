"""``rfetch.BatchStatus``: a batch's counters read in one round trip (Sidekiq Pro's
``Sidekiq::Batch::Status``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from redis import Redis

from rfetch.errors import BatchNotFound
from rfetch.push.client import DEFAULT, Client
from rfetch.store.keys import Keys


@dataclass(frozen=True)
class Failure:
    """Why one job of a batch failed (Sidekiq Pro's ``failure_info``): its latest error."""

    jid: str
    error_class: str
    error_message: str


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def _time(value: str) -> float | None:
    return float(value) if value else None


class BatchStatus:
    """The status of batch ``bid``, read when built (call :meth:`refresh` to read again).

    Args:
        bid: the batch id.
        client: the client whose Redis to read (default: the process-wide one); or
        redis, keys: a Redis client and key names (the admin API passes these).

    Attributes:
        bid, description, parent_bid: as created (``parent_bid`` None for a top batch).
        total: jobs in the batch; pending: jobs that have not succeeded; failures: jobs
            that failed and have not succeeded since (Sidekiq Pro's counters).
        failed_jids: the jids of those failures.
        failure_info: one :class:`Failure` per failed jid (latest error).
        created_at, complete_at, success_at, death_at: Redis time, float epoch seconds;
            the last three None until the event fired (each fires once).
        kids, kids_pending: child batches, and those that have not succeeded.
        callbacks: event -> callback class name, for the events that have one.
        expires_in: seconds until the batch's keys expire (-1: no TTL).

    Raises:
        BatchNotFound: no such batch (never created, or expired).
    """

    def __init__(
        self,
        bid: str,
        client: Client | None = None,
        *,
        redis: Redis | None = None,
        keys: Keys | None = None,
    ) -> None:
        if redis is None or keys is None:
            client = client if client is not None else DEFAULT.get()
            redis, keys = client.redis, client.keys
        self.bid = bid
        self._redis = redis
        self._keys = keys
        self.refresh()

    def refresh(self) -> None:
        """Read the batch again (one pipelined round trip).

        Raises:
            BatchNotFound: the batch no longer exists.
        """
        k = self._keys
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(k.batch(self.bid))
        pipe.hgetall(k.batch_part(self.bid, "failinfo"))
        pipe.ttl(k.batch(self.bid))
        fields, failinfo, ttl = pipe.execute()
        if not fields:
            raise BatchNotFound(f"no batch {self.bid} (never created, or expired)")
        h = {_text(key): _text(value) for key, value in fields.items()}
        self.description = h.get("description", "")
        self.parent_bid = h.get("parent") or None
        self.total = int(h.get("total", 0))
        self.pending = int(h.get("pending", 0))
        self.kids = int(h.get("kids", 0))
        self.kids_pending = int(h.get("kids_pending", 0))
        self.created_at = float(h.get("created_at", 0))
        self.complete_at = _time(h.get("complete_at", ""))
        self.success_at = _time(h.get("success_at", ""))
        self.death_at = _time(h.get("death_at", ""))
        self.expires_in = int(ttl)
        self.callbacks: dict[str, str] = {}
        for event in ("complete", "success", "death"):
            template = h.get(f"cb_{event}")
            if template:
                self.callbacks[event] = str(json.loads(template).get("class", ""))
        self.failure_info: list[Failure] = []
        for jid, info in sorted(failinfo.items()):
            jid_text = _text(jid)
            if not jid_text:
                continue  # the empty member that keeps the hash (and its TTL) in place
            parsed: Any = json.loads(_text(info) or "{}")
            self.failure_info.append(
                Failure(jid_text, str(parsed.get("error_class", "")),
                        str(parsed.get("error_message", "")))
            )

    @property
    def failures(self) -> int:
        """Jobs that failed and have not succeeded since."""
        return len(self.failure_info)

    @property
    def failed_jids(self) -> list[str]:
        """Their jids."""
        return [f.jid for f in self.failure_info]

    @property
    def complete(self) -> bool:
        """Whether ``complete`` fired: every job ran at least once (Sidekiq Pro's
        ``complete?``)."""
        return self.complete_at is not None

    @property
    def succeeded(self) -> bool:
        """Whether ``success`` fired: every job (and child batch) succeeded."""
        return self.success_at is not None

    @property
    def dead(self) -> bool:
        """Whether ``death`` fired: a job of the batch (or of a child) died."""
        return self.death_at is not None

    def as_dict(self) -> dict[str, Any]:
        """The status as JSON-native values (the API, the CLI's ``--json``)."""
        return {
            "bid": self.bid, "description": self.description, "parent_bid": self.parent_bid,
            "total": self.total, "pending": self.pending, "failures": self.failures,
            "failed_jids": self.failed_jids, "created_at": self.created_at,
            "complete": self.complete, "complete_at": self.complete_at,
            "success_at": self.success_at, "death_at": self.death_at, "kids": self.kids,
            "kids_pending": self.kids_pending, "callbacks": self.callbacks,
            "expires_in": self.expires_in,
            "failure_info": [
                {"jid": f.jid, "error_class": f.error_class, "error_message": f.error_message}
                for f in self.failure_info
            ],
        }
