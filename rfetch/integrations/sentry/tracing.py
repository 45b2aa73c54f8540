"""Sentry performance for rfetch: the trace carried in the payload, a transaction per run.

- :class:`SentryClientMiddleware` (client middleware) writes the current trace's
  ``sentry-trace`` and ``baggage`` headers into the payload under
  :data:`TRACE_HEADERS_FIELD`, inside a ``queue.submit.rfetch`` span when a transaction is
  running (a web request's).
- :class:`SentryServerMiddleware` (server middleware) runs each job in an isolation scope of
  its own (the job's tags, no breadcrumbs of the jobs before; the error handler reports a
  failure in it, :class:`FailedRuns`), in a transaction
  ``rfetch/<class>`` (op ``queue.task.rfetch``, source ``task``) that continues that trace
  (``sentry_sdk.continue_trace``), and sends the Crons check-ins of periodic jobs
  (:mod:`rfetch.integrations.sentry.crons`).

The field is sentry-ruby's (``sentry-sidekiq`` writes ``trace_propagation_headers`` in its
client middleware and continues it in its server middleware), which is no field of
Sidekiq's: a job pushed by a Ruby Sidekiq client with sentry-sidekiq continues the Ruby trace
when rfetch runs it, and the other way round. The headers travel in the payload, so every run
of a job (its retries, a run after orphan recovery) belongs to the trace of its push.

A periodic job pushed by the leader (no transaction running) gets a new trace: each tick
starts a trace of its own, as a Celery beat task does (the leader thread's trace would join
every tick), followed by the tick's retries.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from threading import Lock
from typing import TYPE_CHECKING, Any

import sentry_sdk
from sentry_sdk.consts import SPANDATA, SPANSTATUS
from sentry_sdk.scope import Scope, use_isolation_scope
from sentry_sdk.tracing import Transaction, TransactionSource
from sentry_sdk.tracing_utils import has_tracing_enabled
from sentry_sdk.utils import capture_internal_exceptions

from rfetch.integrations.sentry.crons import CheckIn, CheckIns
from rfetch.integrations.sentry.integration import RfetchIntegration
from rfetch.jobs.middleware import AsyncNext
from rfetch.jobs.payload import Payload, epoch_seconds
from rfetch.jobs.schedule import PeriodicRegistry

if TYPE_CHECKING:
    from redis import Redis

    from rfetch.jobs.job import Job

TRACE_HEADERS_FIELD = "trace_propagation_headers"
"""The payload field holding ``{"sentry-trace": ..., "baggage": ...}`` (sentry-sidekiq's)."""

OP_TASK = "queue.task.rfetch"
"""The op of a job run's transaction (sentry-sdk's ``queue.task.<library>`` pattern)."""

OP_SUBMIT = "queue.submit.rfetch"
"""The op of a push's span (sentry-sdk's ``queue.submit.<library>`` pattern)."""

SYSTEM = "rfetch"
MAX_FAILED_RUNS = 1024
"""Failed runs whose trace waits for the error handler; older ones are forgotten (a
failure the handler never sees: a job over its limiter's limit, put back)."""


def transaction_name(payload: Mapping[str, Any]) -> str:
    """``rfetch/<class>`` (``wrapped`` for an ActiveJob-wrapped job): the name of a job
    run's transaction and of its error events (sentry-ruby names Sidekiq's
    ``Sidekiq/<class>``)."""
    return f"rfetch/{payload.get('wrapped') or payload.get('class')}"


def _options(defaults: RfetchIntegration) -> RfetchIntegration | None:
    """The options of the initialised client's integration (``defaults`` when it was
    initialised without it); None when sentry-sdk is not initialised."""
    client = sentry_sdk.get_client()
    if not client.is_active():
        return None
    return client.get_integration(RfetchIntegration) or defaults


@dataclass(frozen=True)
class FailedRun:
    """What the error handler needs of a run that raised, kept by the server middleware.

    Attributes:
        headers: ``sentry-trace`` and ``baggage`` of the run's transaction.
        scope: the run's isolation scope (its tags and breadcrumbs: the job's log lines).
    """

    headers: dict[str, str]
    scope: Scope


class FailedRuns:
    """Runs that raised, by jid: the server middleware keeps them inside the job's scope and
    transaction, the error handler (called after the server chain) takes them, so the error
    event belongs to the job's trace and carries the job's breadcrumbs.

    Args:
        limit: runs kept at most, the oldest forgotten first.
    """

    def __init__(self, limit: int = MAX_FAILED_RUNS) -> None:
        self.limit = limit
        self._lock = Lock()
        self._runs: OrderedDict[str, FailedRun] = OrderedDict()

    def remember(self, jid: str, run: FailedRun) -> None:
        """Keep ``run`` for ``jid``, until :meth:`take`."""
        with self._lock:
            self._runs[jid] = run
            self._runs.move_to_end(jid)
            while len(self._runs) > self.limit:
                self._runs.popitem(last=False)

    def take(self, jid: str) -> FailedRun | None:
        """The run kept for ``jid``, forgotten now; None when none is kept."""
        with self._lock:
            return self._runs.pop(jid, None)

    @contextmanager
    def scope_of(self, jid: str) -> Iterator[None]:
        """The block in the failed run's isolation scope and trace, when one is kept for
        ``jid`` (else in the current scopes)."""
        run = self.take(jid)
        if run is None:
            yield
            return
        with use_isolation_scope(run.scope):
            if run.headers:
                sentry_sdk.continue_trace(run.headers)
            yield


class SentryClientMiddleware:
    """Client middleware: the current trace into the payload (see the module docstring).

    A payload that already has the field (pushed again, or from sentry-sidekiq) keeps it."""

    def __init__(self) -> None:
        self.defaults = RfetchIntegration()

    def __repr__(self) -> str:
        return "SentryClientMiddleware()"

    def __call__(
        self,
        job_class: str,
        job: Payload,
        queue: str,
        redis: Redis,
        call_next: Callable[[], Payload | None],
    ) -> Payload | None:
        if _options(self.defaults) is None or TRACE_HEADERS_FIELD in job:
            return call_next()
        scope = sentry_sdk.get_current_scope()
        if scope.span is None:
            if job.get("periodic") is None:
                self._inject(job)
            else:
                with sentry_sdk.isolation_scope() as isolation:
                    isolation.set_new_propagation_context()  # a trace of the tick's own
                    self._inject(job)
            return call_next()
        with sentry_sdk.start_span(
            op=OP_SUBMIT, name=job_class, origin=RfetchIntegration.origin
        ) as span:
            span.set_data(SPANDATA.MESSAGING_SYSTEM, SYSTEM)
            span.set_data(SPANDATA.MESSAGING_MESSAGE_ID, job.get("jid"))
            span.set_data(SPANDATA.MESSAGING_DESTINATION_NAME, queue)
            self._inject(job)
            return call_next()

    @staticmethod
    def _inject(job: Payload) -> None:
        headers = dict(sentry_sdk.get_current_scope().iter_trace_propagation_headers())
        if headers:  # none when propagate_traces=False
            job[TRACE_HEADERS_FIELD] = headers


def _incoming_headers(payload: Mapping[str, Any]) -> dict[str, str]:
    headers = payload.get(TRACE_HEADERS_FIELD)
    if not isinstance(headers, Mapping):
        return {}
    return {k: v for k, v in headers.items() if isinstance(k, str) and isinstance(v, str)}


def _describe(transaction: Transaction, payload: Mapping[str, Any], queue: str) -> None:
    """The transaction's messaging data (sentry-sdk's queue-monitoring fields)."""
    transaction.set_data(SPANDATA.MESSAGING_SYSTEM, SYSTEM)
    transaction.set_data(SPANDATA.MESSAGING_MESSAGE_ID, payload.get("jid"))
    transaction.set_data(SPANDATA.MESSAGING_DESTINATION_NAME, queue)
    # Sidekiq's retry_count is 0 on the first retry (the count of failures before it, less
    # one) and absent on the first run; the messaging field counts the retries: 1, 0.
    retry_count = payload.get("retry_count")
    retries = retry_count + 1 if isinstance(retry_count, int) else 0
    transaction.set_data(SPANDATA.MESSAGING_MESSAGE_RETRY_COUNT, retries)
    enqueued = epoch_seconds(payload.get("enqueued_at"))
    if enqueued is not None:  # milliseconds, as sentry-sdk's Celery integration sends it
        latency = max(0, round((time.time() - enqueued) * 1000))
        transaction.set_data(SPANDATA.MESSAGING_MESSAGE_RECEIVE_LATENCY, latency)


class SentryServerMiddleware:
    """Server middleware: each run in its own scope and transaction, periodic jobs checking
    in with Sentry Crons (see the module docstring). A run that raises sets the
    transaction's status to ``internal_error`` and its check-in to ``error``; the exception
    goes on to rfetch's retry as before.

    Args:
        periodic: the worker's schedules (``Config.periodic``), for the monitor configs.
        failed: where the trace of a failed run waits for the error handler.
    """

    def __init__(self, periodic: PeriodicRegistry, failed: FailedRuns) -> None:
        self.check_ins = CheckIns(periodic)
        self.failed = failed
        self.defaults = RfetchIntegration()

    def __repr__(self) -> str:
        return "SentryServerMiddleware()"

    def __call__(
        self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]
    ) -> None:
        with self.run(payload, queue):
            call_next()

    async def acall(self, job: Job, payload: Payload, queue: str, call_next: AsyncNext) -> None:
        """The same for an async job, on the worker's event loop (sentry-sdk's scopes are
        context variables: each job's task has its own)."""
        with self.run(payload, queue):
            await call_next()

    @contextmanager
    def run(self, payload: Payload, queue: str) -> Iterator[None]:
        """One run of ``payload``: its scope, transaction and check-ins around the block."""
        options = _options(self.defaults)
        if options is None:
            yield
            return
        check_in: CheckIn | None = None
        with capture_internal_exceptions():
            check_in = self.check_ins.start(payload, options)
        ok = False
        try:
            with self._transaction(payload, queue) as transaction:
                try:
                    yield
                except BaseException:
                    if transaction is not None:
                        transaction.set_status(SPANSTATUS.INTERNAL_ERROR)
                    self._remember_failure(payload)
                    raise
                if transaction is not None:
                    transaction.set_status(SPANSTATUS.OK)
                ok = True
        finally:
            if check_in is not None:
                with capture_internal_exceptions():
                    check_in.finish(ok)

    @contextmanager
    def _transaction(self, payload: Payload, queue: str) -> Iterator[Transaction | None]:
        """The run's isolation scope, in the push's trace; and its transaction, None when
        tracing is off (no traces sample rate or sampler): a transaction nobody samples
        costs as much again as the scope and the trace (docs/integrations.md)."""
        with sentry_sdk.isolation_scope() as scope:
            scope.clear_breadcrumbs()
            scope.set_tag("jid", str(payload.get("jid")))
            scope.set_tag("queue", queue)
            scope.set_tag("job_class", str(payload.get("wrapped") or payload.get("class")))
            headers = _incoming_headers(payload)
            if not has_tracing_enabled(sentry_sdk.get_client().options):
                if headers:
                    scope.generate_propagation_context(headers)
                else:
                    scope.set_new_propagation_context()  # a trace of the run's own
                yield None
                return
            transaction = sentry_sdk.continue_trace(
                headers,
                op=OP_TASK,
                name=transaction_name(payload),
                source=TransactionSource.TASK,
                origin=RfetchIntegration.origin,
            )
            with sentry_sdk.start_transaction(
                transaction, custom_sampling_context={"rfetch_job": payload}
            ):
                with capture_internal_exceptions():
                    _describe(transaction, payload, queue)
                yield transaction

    def _remember_failure(self, payload: Payload) -> None:
        with capture_internal_exceptions():
            jid = payload.get("jid")
            headers = dict(sentry_sdk.get_current_scope().iter_trace_propagation_headers())
            if isinstance(jid, str):
                self.failed.remember(jid, FailedRun(headers, sentry_sdk.get_isolation_scope()))
