"""OpenTelemetry tracing for pushes and job runs (extra ``otel``: opentelemetry-api/-sdk).

Two middleware, installed with :func:`install`:

- :class:`ClientTracing` (client middleware) starts a ``PRODUCER`` span ``send <queue>``
  around each push and writes the current trace context into the payload with the
  globally configured propagator (W3C ``traceparent``/``tracestate`` and ``baggage`` by
  default), as top-level fields of the job;
- :class:`ServerTracing` (server middleware) reads that context back and runs the job in a
  ``CONSUMER`` span ``process <queue>``. By default the span starts a new trace and carries
  a *link* to the producer's span (``propagation="link"``); ``"child"`` makes it a child of
  the producer's span instead; ``"none"`` ignores the payload's context.

This is the layout and the default of Ruby's ``opentelemetry-instrumentation-sidekiq``
(``OpenTelemetry.propagation.inject(job)`` in its client middleware, ``extract(msg)`` and
``propagation_style: :link`` in its server middleware), so a job pushed by a Ruby Sidekiq
client with that instrumentation is linked to the Ruby trace when rfetch runs it, and the
other way round. The context travels in the payload, so every run of a job (its retries,
a run after orphan recovery or after a TERM pushed it back) links to the same push.

Span attributes follow OpenTelemetry's semantic conventions for messaging:
``messaging.system`` (``"rfetch"``), ``messaging.operation.type`` (``send``/``process``),
``messaging.operation.name``, ``messaging.destination.name`` (the queue),
``messaging.message.id`` (the jid), plus ``messaging.rfetch.job.class`` and, on a retry,
``messaging.rfetch.retry_count``. A job that raises records the exception and sets the
span's status to error (the exception still propagates: the job is retried as usual).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from opentelemetry import context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Tracer, TracerProvider

from rfetch.config import Config
from rfetch.errors import ConfigError
from rfetch.jobs.middleware import AsyncNext
from rfetch.jobs.payload import Payload, epoch_seconds
from rfetch.version import __version__

if TYPE_CHECKING:
    from redis import Redis

    from rfetch.jobs.job import Job

Propagation = Literal["link", "child", "none"]

SYSTEM = "rfetch"

# OpenTelemetry semantic conventions for messaging (attribute registry, messaging.*).
MESSAGING_SYSTEM = "messaging.system"
MESSAGING_OPERATION_TYPE = "messaging.operation.type"
MESSAGING_OPERATION_NAME = "messaging.operation.name"
MESSAGING_DESTINATION_NAME = "messaging.destination.name"
MESSAGING_MESSAGE_ID = "messaging.message.id"
JOB_CLASS = "messaging.rfetch.job.class"
RETRY_COUNT = "messaging.rfetch.retry_count"


def _tracer(provider: TracerProvider | None) -> Tracer:
    return trace.get_tracer("rfetch", __version__, tracer_provider=provider)


def _attributes(operation: str, payload: Mapping[str, Any], queue: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        MESSAGING_SYSTEM: SYSTEM,
        MESSAGING_OPERATION_TYPE: operation,
        MESSAGING_OPERATION_NAME: operation,
        MESSAGING_DESTINATION_NAME: queue,
        MESSAGING_MESSAGE_ID: str(payload.get("jid", "")),
        JOB_CLASS: str(payload.get("wrapped") or payload.get("class", "")),
    }
    retry_count = payload.get("retry_count")
    if isinstance(retry_count, int) and not isinstance(retry_count, bool):
        attributes[RETRY_COUNT] = retry_count
    return attributes


def _add_events(span: trace.Span, payload: Mapping[str, Any], fields: tuple[str, ...]) -> None:
    """Span events at the payload's times (float epoch seconds, or Sidekiq 8's ms)."""
    for field in fields:
        seconds = epoch_seconds(payload.get(field))
        if seconds is not None:
            span.add_event(field, timestamp=int(seconds * 1_000_000_000))


class ClientTracing:
    """Client middleware: a ``PRODUCER`` span per push, its context written into the
    payload (``traceparent``, ``tracestate``, ``baggage``; Ruby's Sidekiq instrumentation
    writes the same fields).

    Args:
        tracer_provider: the provider to use (default: the global one).
        events: add a ``created_at`` span event (as Ruby's instrumentation does); off by
            default, as an event costs about as much as the span's own attributes.
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, events: bool = False
    ) -> None:
        self.tracer = _tracer(tracer_provider)
        self.events = events

    def __call__(
        self,
        job_class: str,
        job: Payload,
        queue: str,
        redis: Redis,
        call_next: Callable[[], Payload | None],
    ) -> Payload | None:
        with self.tracer.start_as_current_span(
            f"send {queue}", kind=SpanKind.PRODUCER, attributes=_attributes("send", job, queue)
        ) as span:
            if self.events:
                _add_events(span, job, ("created_at",))
            propagate.inject(job)
            return call_next()


class ServerTracing:
    """Server middleware: each run of a job in a ``CONSUMER`` span, linked to (or a child
    of) the span that pushed it.

    Args:
        tracer_provider: the provider to use (default: the global one).
        propagation: ``"link"`` (default, as Ruby's instrumentation: a new trace with a link
            to the producer), ``"child"`` (the run joins the producer's trace) or ``"none"``.
        events: add ``created_at`` and ``enqueued_at`` span events with the payload's times
            (as Ruby's instrumentation does); off by default: the two events double the
            middleware's own cost per job (docs/integrations.md has the figures).

    Raises:
        ConfigError: an unknown ``propagation``.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        propagation: Propagation = "link",
        *,
        events: bool = False,
    ) -> None:
        if propagation not in ("link", "child", "none"):
            raise ConfigError(
                f'propagation must be "link", "child" or "none", got {propagation!r}'
            )
        self.tracer = _tracer(tracer_provider)
        self.propagation = propagation
        self.events = events

    def __call__(
        self, job: Job, payload: Payload, queue: str, call_next: Callable[[], None]
    ) -> None:
        with self.span(payload, queue):
            call_next()

    async def acall(self, job: Job, payload: Payload, queue: str, call_next: AsyncNext) -> None:
        """The same for an async job, on the worker's event loop."""
        with self.span(payload, queue):
            await call_next()

    @contextmanager
    def span(self, payload: Payload, queue: str) -> Iterator[trace.Span]:
        """The consumer span of one run of ``payload``, current for the block (also for
        async jobs, whose middleware runs on the event loop)."""
        extracted = propagate.extract(payload) if self.propagation != "none" else Context()
        links: list[Link] = []
        parent = extracted
        if self.propagation != "child":
            producer = trace.get_current_span(extracted).get_span_context()
            if self.propagation == "link" and producer.is_valid:
                links.append(Link(producer))
            # A root span, in a context that keeps the extracted baggage.
            parent = trace.set_span_in_context(trace.INVALID_SPAN, extracted)
        token = context.attach(parent)  # the job sees the producer's baggage
        try:
            with self.tracer.start_as_current_span(
                f"process {queue}",
                kind=SpanKind.CONSUMER,
                attributes=_attributes("process", payload, queue),
                links=links,
            ) as span:
                if self.events:
                    _add_events(span, payload, ("created_at", "enqueued_at"))
                yield span
        finally:
            context.detach(token)


def install(
    config: Config,
    tracer_provider: TracerProvider | None = None,
    propagation: Propagation = "link",
    *,
    events: bool = False,
) -> None:
    """Put :class:`ClientTracing` first in ``config.client_middleware`` and
    :class:`ServerTracing` first in ``config.server_middleware`` (once, however often it is
    called), so the spans wrap every other middleware.

    Use it in the module a worker loads with ``-r``::

        def configure_worker(config: rfetch.Config) -> None:
            rfetch.integrations.opentelemetry.install(config)

    and for the application's client, before ``rfetch.configure(config)``.

    Args:
        config: the Config to change.
        tracer_provider: the provider (default: the global one, set by your OpenTelemetry
            SDK setup).
        propagation, events: see :class:`ServerTracing`.
    """
    if not any(isinstance(m, ClientTracing) for m in config.client_middleware):
        config.client_middleware.insert(0, ClientTracing(tracer_provider, events=events))
    if not any(isinstance(m, ServerTracing) for m in config.server_middleware):
        config.server_middleware.insert(
            0, ServerTracing(tracer_provider, propagation, events=events)
        )
