"""One job execution: parse, look up the class, middleware, perform, then ack or retry."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from rfetch.config import Config
from rfetch.errors import InvalidJob, UnknownJob
from rfetch.fetch import ReliableFetch, UnitOfWork
from rfetch.job import Job
from rfetch.logs import JobLog
from rfetch.middleware import run_server_chain
from rfetch.payload import Payload, epoch_seconds, loads
from rfetch.registry import Registry
from rfetch.reporting import report
from rfetch.retry import JobRetry
from rfetch.stats import Stats

log = logging.getLogger("rfetch.job")

COALESCE_MAX = 1000
"""Waiting jobs of a key merged into one execution at most; the rest form the next one."""


def coalesce_score(payload: Payload) -> float:
    """A job's place in a coalesced batch: its ``score`` if a number, else its push time
    ``created_at`` (float epoch seconds, Sidekiq 8's milliseconds read too), which, unlike
    ``enqueued_at``, a retry does not change, else ``enqueued_at``, else 0."""
    score = payload.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        return float(score)
    for field in ("created_at", "enqueued_at"):
        seconds = epoch_seconds(payload.get(field))
        if seconds is not None:
            return seconds
    return 0.0


class Processor:
    """Runs fetched jobs; shared by the pool's threads (it keeps no per-job state).

    Args:
        config: server middleware and error handlers.
        fetch: acknowledges finished jobs.
        registry: the job classes this worker may run.
        job_retry: records failures.
        stats: processed/failed counters.
        ack: acknowledges a finished job (default ``fetch.acknowledge``; the manager passes
            its deferred acknowledgement, which rides on the next fetch).
    """

    def __init__(
        self,
        config: Config,
        fetch: ReliableFetch,
        registry: Registry,
        job_retry: JobRetry,
        stats: Stats,
        ack: Callable[[UnitOfWork], object] | None = None,
    ) -> None:
        self.config = config
        self.fetch = fetch
        self.ack = ack if ack is not None else fetch.acknowledge
        self.registry = registry
        self.job_retry = job_retry
        self.stats = stats
        self.job_log = JobLog(log)

    def process(self, unit: UnitOfWork) -> None:
        """Run one job to its end: acknowledged, in the retry/dead set, or discarded.

        Never raises for a job's own failure; the worker thread goes on.

        Args:
            unit: the fetched job.
        """
        try:
            job = loads(unit.raw)
        except InvalidJob as exc:
            self.job_retry.bury_invalid(unit, exc)
            self._report(exc, {"queue": unit.queue, "context": "invalid job"})
            return
        name = job["class"]
        jid = job["jid"]
        followers: list[tuple[UnitOfWork, Payload]] = []
        if "ordering_key" in job or "unique_key" in job:
            self._gate(unit, job)
            if job.get("coalesce") and unit.ordering_key is not None:
                followers = self._take_followers(unit)
        job_log = self.job_log
        job_log.event("start", name, jid, unit.queue, None)
        started = time.perf_counter()
        instance: Job | None = None
        try:
            cls = self.registry.get(name)
            if cls is None:
                raise UnknownJob(
                    f"no job named {name!r} is registered in this worker (is the module that "
                    "defines it passed with -r, and deployed?)"
                )
            instance = cls()
            instance.jid = jid
            if job.get("coalesce") and unit.ordering_key is not None:
                self._perform_coalesced(instance, job, unit.queue, followers)
            else:
                self._perform(instance, job, unit.queue)
        except BaseException as exc:  # a job's failure, whatever it raised, is a retry
            elapsed = round((time.perf_counter() - started) * 1000, 3)
            log.warning(
                "fail: %s: %s",
                type(exc).__name__,
                exc,
                extra={"job_class": name, "jid": jid, "queue": unit.queue, "elapsed_ms": elapsed},
            )
            self.stats.record(name, True, elapsed)
            self._report(exc, {"job": job, "queue": unit.queue, "jid": job["jid"]})
            if followers:
                # Back to the head of the key's list, still behind the failed holder: they
                # coalesce again when it is retried (the key stays blocked).
                self.fetch.requeue([f for f, _ in followers])
            self.job_retry.fail(unit, job, instance, exc)
            return
        elapsed = round((time.perf_counter() - started) * 1000, 3)
        for follower, _ in followers:
            self.fetch.acknowledge(follower)
        self.ack(unit)  # a keyed job's release rides on the ack (fetch.lua or finish.lua)
        self.stats.record(name, False, elapsed)
        job_log.event("done", name, jid, unit.queue, elapsed)

    def _gate(self, unit: UnitOfWork, job: dict[str, Any]) -> None:
        """Note a job's ordering key and unique lock on its unit (issue #5), for the
        scripts that release them and for the heartbeat's leases."""
        key, unique = job.get("ordering_key"), job.get("unique_key")
        unit.jid = job["jid"]
        unit.ordering_key = key if isinstance(key, str) and key else None
        unit.unique = unique if isinstance(unique, str) and unique else None

    def _take_followers(self, unit: UnitOfWork) -> list[tuple[UnitOfWork, Payload]]:
        """Move the key's waiting jobs into the private list (``coalesce.lua``) and parse
        them; an unparseable one goes to the dead set as any invalid job."""
        raws = self.fetch.take_followers(unit, COALESCE_MAX)
        followers: list[tuple[UnitOfWork, Payload]] = []
        for raw in raws:
            follower = UnitOfWork(unit.queue, raw, unit.private_key)
            try:
                payload = loads(raw)
            except InvalidJob as exc:
                self.job_retry.bury_invalid(follower, exc)
                continue
            unique = payload.get("unique_key")
            follower.jid = payload["jid"]
            follower.unique = unique if isinstance(unique, str) and unique else None
            followers.append((follower, payload))
        return followers

    def _perform_coalesced(
        self,
        instance: Job,
        job: Payload,
        queue: str,
        followers: list[tuple[UnitOfWork, Payload]],
    ) -> None:
        """One execution for the holder and its followers, in score order (``score``,
        default ``created_at``; stable): ``perform(batch)`` with the list of argument
        lists (``coalesce=True``), or ``perform(*args)`` of the newest (``"last"``)."""
        payloads = [job, *(p for _, p in followers)]
        ordered = sorted(payloads, key=coalesce_score)
        args = ordered[-1]["args"] if job.get("coalesce") == "last" else [
            [p["args"] for p in ordered]
        ]

        def call() -> None:
            instance.perform(*args)

        chain = self.config.server_middleware
        if not chain:
            call()
            return
        run_server_chain(chain, instance, job, queue, call)

    def _perform(self, instance: Job, job: dict[str, Any], queue: str) -> None:
        args = job["args"]
        chain = self.config.server_middleware
        if not chain:
            instance.perform(*args)
            return
        run_server_chain(chain, instance, job, queue, lambda: instance.perform(*args))

    def _report(self, exc: BaseException, context: dict[str, Any]) -> None:
        report(self.config.error_handlers, exc, context)
