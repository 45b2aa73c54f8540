"""Coalescing (``coalesce=True`` or ``"last"`` with an ordering key): the server step that
runs the key's waiting jobs as one execution of its holder.

Before the holder runs, the key's waiting jobs (its followers) are moved into the private
list (``coalesce.lua``) and parsed; ``perform`` gets the list of their argument lists in
score order, or the newest one's. On success the followers are acknowledged before the
holder; on a failure or an over-limit reschedule they go back to the head of the key's
list, still behind the holder, so they coalesce again when it runs again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rfetch.errors import InvalidJob
from rfetch.jobs.payload import Payload, Routing, loads
from rfetch.worker.job_run import JobRun
from rfetch.worker.steps import Step
from rfetch.worker.unit import UnitOfWork

if TYPE_CHECKING:
    from rfetch.jobs.job import Job
    from rfetch.worker.retry import JobRetry

COALESCE_MAX = 1000
"""Waiting jobs of a key merged into one execution at most; the rest form the next one."""

REQUEUED_ON = frozenset({"failed", "rescheduled"})
"""The holder's outcomes that send its followers back behind it (a durable end leaves
them with it)."""


class Coalesce(Step):
    """The coalescing step.

    Args:
        job_retry: buries a follower whose payload is not valid (as any invalid job).
    """

    name = "coalesce"

    def __init__(self, job_retry: JobRetry) -> None:
        self.job_retry = job_retry

    def applies(self, run: JobRun) -> bool:
        """Whether the job coalesces its key's waiting jobs (read at fetch)."""
        routing = run.unit.routing
        return routing is not None and routing.coalesced

    def before(self, run: JobRun) -> str | None:
        """Take the key's followers into ``run.followers``; never ends the job.

        Raises:
            redis.exceptions.ConnectionError / TimeoutError: Redis is unreachable.
        """
        run.followers = self._take(run.unit)
        return None

    def begin(self, run: JobRun, instance: Job) -> None:
        """``perform``'s arguments: a coalesced key's in score order (``score``, default
        ``created_at``; stable): the list of argument lists (``coalesce=True``) or the
        newest one's (``coalesce="last"``)."""
        if not run.followers:
            routing = run.unit.routing
            if routing is None or not routing.coalesced:
                return
        payloads = [run.job, *(p for _, p in run.followers)]
        ordered = sorted(payloads, key=lambda p: Routing.of(p).score)
        if run.job.get("coalesce") == "last":
            run.args = list(ordered[-1]["args"])
        else:
            run.args = [[p["args"] for p in ordered]]

    def leaving(self, run: JobRun, outcome: str) -> None:
        """Acknowledge the followers on success; push them back to the head of the key's
        list, behind the holder (the key stays blocked), on a failure or reschedule."""
        if not run.followers:
            return
        if outcome == "succeeded":
            for follower, _ in run.followers:
                follower.acknowledge()
        elif outcome in REQUEUED_ON:
            run.unit.fetch.requeue([f for f, _ in run.followers])

    def _take(self, unit: UnitOfWork) -> list[tuple[UnitOfWork, Payload]]:
        followers: list[tuple[UnitOfWork, Payload]] = []
        for follower in unit.fetch.take_followers(unit, COALESCE_MAX):
            try:
                payload: Any = loads(follower.raw)
            except InvalidJob as exc:
                self.job_retry.bury_invalid(follower, exc)
                continue
            followers.append((follower, payload))
        return followers
