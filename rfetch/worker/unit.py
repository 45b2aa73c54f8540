"""The unit of work: one fetched job, immutable, owning its acknowledgement and push-back."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rfetch.jobs.payload import Routing
from rfetch.store.commands import Outcome
from rfetch.store.outcomes import JobOutcome

if TYPE_CHECKING:
    from rfetch.worker.fetch import ReliableFetch


@dataclass(frozen=True, slots=True, eq=False)
class UnitOfWork:
    """One fetched job, immutable (Sidekiq's ``BasicFetch::UnitOfWork``): where it came
    from, the exact bytes fetched (what LREM matches), and its routing fields, read once at
    fetch. It owns its acknowledgement and push-back.

    Attributes:
        queue: queue name.
        raw: the payload exactly as fetched.
        private_key: the private list holding it until acknowledged.
        routing: the payload's routing fields (ordering key, unique lock, tenant, ...);
            None for a plain job (or one that is not a JSON object).
        fetch: the reliable fetch that took it.
    """

    queue: str
    raw: bytes
    private_key: str
    routing: Routing | None
    fetch: ReliableFetch = field(repr=False)

    @property
    def jid(self) -> str:
        """The jid read at fetch ("" for a plain job: read it from the parsed payload)."""
        return self.routing.jid if self.routing is not None else ""

    def acknowledge(self, give_up: float | None = None) -> bool:
        """Remove the finished job from its private list now (see
        :meth:`ReliableFetch.acknowledge`)."""
        return self.fetch.acknowledge(self, give_up)

    def discard(
        self, job: Mapping[str, Any] | None, outcome: JobOutcome = JobOutcome.DISCARDED
    ) -> bool:
        """Remove a job that ends unrun or failed and is neither retried nor kept
        (``retry: false``, ``dead: false``, a discarding ``retry_in``, a cancel, an expiry):
        ended as ``outcome`` (``lua/lib/outcome.lua``; for a batched job a death in its
        batch) in the same call (``finish.lua``). ``job``: its payload with the error
        fields. True if this call removed it."""
        failure = failure_json(job) if self.routing is not None and self.routing.batched else None
        return self.fetch.acknowledge(self, None, failure, outcome)

    def requeue(self) -> bool:
        """Push the job back to the head of its queue if still in the private list."""
        return self.fetch.requeue([self]) == 1

    def settle(
        self,
        zset: str,
        score: float,
        payload: bytes | str,
        trim_before: float | None = None,
        cap: int | None = None,
        outcome: Outcome = "dead",
    ) -> bool:
        """Move the failed job into the retry or dead set (see :meth:`ReliableFetch.settle`);
        a batched job's failure or death counts in its batch in the same call."""
        failure = ""
        if self.routing is not None and self.routing.batched:
            try:
                stored = json.loads(payload)
            except ValueError:
                stored = None
            failure = failure_json(stored if isinstance(stored, dict) else None)
        return self.fetch.settle(
            self, zset, score, payload, trim_before, cap, None, outcome, failure
        )


def failure_json(job: Mapping[str, Any] | None) -> str:
    """A batch's failure info for one job (Sidekiq Pro's ``failure_info``): JSON
    ``{"error_class", "error_message"}`` from the payload's error fields."""
    job = job or {}
    return json.dumps(
        {"error_class": job.get("error_class", ""), "error_message": job.get("error_message", "")}
    )
